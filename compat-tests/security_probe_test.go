package compattests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSecurityProbe is issue 24's first "done when", made exhaustive and
// automatic. It starts apache/kafka's single-node sasl_plaintext layout
// (CONTROLLER:PLAINTEXT, two SASL_PLAINTEXT client listeners with PLAIN)
// with the StandardAuthorizer and super.users=User:admin, and sends every
// API key each listener advertises — read from that listener's
// ApiVersions, so a key served later is probed without editing this test,
// and one the table (security_probe_table_test.go) does not know fails it —
// at the highest version both sides speak, one fresh connection a request:
//   - on the CONTROLLER listener, as an anonymous stranger;
//   - on each client listener, before authenticating (Kafka serves nothing
//     there but ApiVersions and the SASL handshake, and closes the
//     connection on anything else);
//   - on each client listener as alice: authenticated, no ACL names her;
//   - on each client listener as admin, a super user.
//
// The strangers send attacks (a grant of ALL on the cluster to mallory, a
// deletion of every ACL, of the topic, of its records, super.users
// rewritten, a SCRAM credential for mallory, a broker registered as 99,
// the metadata log fetched ...); each must meet the answer Kafka's
// StandardAuthorizer gives, with the authorization error where Kafka puts
// it (a closed connection counts as a refusal too). The keys that need no
// ACL must be allowed (and a listing must list nothing), and the admin's
// harmless requests must be allowed, so that an authorizer that refuses
// everyone fails as well. A refused mutation must leave an audit line.
// Around the probe, admin describes everything the attacks aim at: topics
// and partitions, ACLs, the cluster-default, broker and topic configs,
// SCRAM credentials, quotas, brokers (fenced ones too), features, the
// group's offsets, the transaction, the log start offsets. Nothing may
// differ afterwards; admin's throwaway ACL is gone again.
func TestSecurityProbe(t *testing.T) {
	start := time.Now()
	ex := startApacheSASLExample(t,
		"KAFKA_AUTHORIZER_CLASS_NAME=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"KAFKA_SUPER_USERS=User:admin")
	ctx := testCtx(t, 90*time.Second)
	admin := newClient(t, ex.host, plainOpt("admin", "admin-secret"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	env := spSetUp(t, ctx, admin)
	before := spSnapshot(t, ctx, admin, env)
	spCheckSetUp(t, before, env)
	t.Logf("set up and described in %v: %d facts", time.Since(start).Round(time.Millisecond), len(before))

	table := spTable()
	type caller struct {
		who       string // for messages
		principal string // in audit lines; "" for none
		opts      []kgo.Opt
		role      spRole
	}
	type listener struct {
		name, addr string
		ctl        bool
		callers    []caller
	}
	stranger := caller{"anonymous", "User:ANONYMOUS", nil, spStranger}
	listeners := []listener{
		{"CONTROLLER", ex.ctl, true, []caller{stranger}},
	}
	for _, l := range []struct{ name, addr string }{{"SASL_PLAINTEXT_HOST", ex.host}, {"SASL_PLAINTEXT", ex.internal}} {
		listeners = append(listeners, listener{l.name, l.addr, false, []caller{
			{"unauthenticated", "", nil, spUnauthenticated},
			{"alice", "User:alice", []kgo.Opt{plainOpt("alice", "alice-secret")}, spStranger},
			{"admin", "User:admin", []kgo.Opt{plainOpt("admin", "admin-secret")}, spAdmin},
		}})
	}

	var refusedByClose []string
	var audited []spAuditWant
	probed := 0
	for _, l := range listeners {
		for _, c := range l.callers {
			keys := spAdvertised(t, ctx, l.addr, c.opts)
			if len(keys) == 0 {
				t.Errorf("%s on %s: ApiVersions lists no key", c.who, l.name)
			}
			for _, k := range keys {
				where := fmt.Sprintf("%s %s (key %d, v%d) on %s", c.who, kmsg.NameForKey(k.ApiKey), k.ApiKey, k.MaxVersion, l.name)
				kp, known := table[k.ApiKey]
				var sends []spAttack
				switch {
				case !known:
				case c.role == spAdmin:
					if kp.harmless != nil {
						sends = []spAttack{{"harmless", kp.harmless, spOutcome{allowed: true, check: kp.harmlessCheck}}}
					}
				case l.ctl:
					sends = kp.ctl
				case c.role == spUnauthenticated:
					if len(kp.client) > 0 {
						sends = []spAttack{{kp.client[0].what, kp.client[0].req, spBeforeAuth(k.ApiKey)}}
					}
				default:
					sends = kp.client
				}
				if len(sends) == 0 {
					t.Errorf("%s: advertised, but the probe's table does not know what Kafka answers this caller here", where)
					continue
				}
				for _, a := range sends {
					probed++
					req := a.req(env)
					resp, err := spSend(ctx, l.addr, c.opts, req)
					if v := req.GetVersion(); v != k.MaxVersion {
						t.Logf("%s, %s: sent at v%d, kmsg's highest", where, a.what, v)
					}
					msg, closed := a.want.judge(env, resp, err)
					if msg != "" {
						t.Errorf("%s, %s: %s", where, a.what, msg)
						continue
					}
					if closed && !a.want.closed {
						refusedByClose = append(refusedByClose, where+", "+a.what)
					}
					if kp.mutation && !a.want.allowed && !closed && c.principal != "" {
						audited = append(audited, spAuditWant{c.principal, l.ctl, k.ApiKey, where + ", " + a.what})
					}
				}
			}
		}
	}
	t.Logf("%d requests probed in %v", probed, time.Since(start).Round(time.Millisecond))
	for _, r := range refusedByClose {
		t.Logf("refused by closing the connection (Kafka answers with an error code): %s", r)
	}

	after := spSnapshot(t, ctx, admin, env)
	for _, d := range spDiff(before, after) {
		t.Errorf("changed by the probe: %s", d)
	}
	spCheckAudit(t, ex.logs, audited)
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// spRole is who a caller is to the authorizer.
type spRole int

const (
	spStranger        spRole = iota // authenticated (or anonymous on PLAINTEXT), no ACL names it
	spUnauthenticated               // on a SASL listener, not (yet) authenticated
	spAdmin                         // a super user
)

// spEnv is what the set-up made for the attacks to aim at.
type spEnv struct {
	topic     string   // two partitions, one record in partition 0, retention.ms set
	topicID   [16]byte //
	group     string   // an offset committed for topic/0
	txn       string   // a transactional id with a producer id
	pid       int64    // txn's producer id and epoch
	epoch     int16    //
	user      string   // a SCRAM credential and a producer quota
	retention string   // topic's retention.ms
	mvLevel   int16    // the finalized metadata.version
	clusterID string
	batch     []byte // one valid record batch
}

const (
	spTopic     = "probe.topic"
	spGroup     = "probe.group"
	spTxn       = "probe.txn"
	spUser      = "probe-user"
	spAdminName = "probe.admin." // prefix of what admin's harmless requests name
	spClusterID = "4L6g3nShT-eMCtK--X86sw"
)

// spSetUp makes, as admin, the topic, an ACL (for someone else than the
// callers), a SCRAM credential, a quota, a dynamic broker config, a
// group's offset and a transactional producer.
func spSetUp(t *testing.T, ctx context.Context, cl *kgo.Client) *spEnv {
	t.Helper()
	e := &spEnv{topic: spTopic, group: spGroup, txn: spTxn, user: spUser, retention: "86400000", clusterID: spClusterID,
		batch: recordBatch(t, []byte("k"), []byte("v"))}
	adm := kadm.NewClient(cl)
	createTopic(t, adm, e.topic, 2, map[string]*string{"retention.ms": &e.retention})
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: e.topic, Partition: 0, Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", e.topic, err)
	}
	td, err := adm.ListTopics(ctx, e.topic)
	if err != nil || td[e.topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", e.topic, err, td[e.topic].Err)
	}
	e.topicID = td[e.topic].ID

	acls, err := adm.CreateACLs(ctx, newACLs().Allow("User:carol").Topics(e.topic).Operations(kadm.OpRead))
	if err != nil || len(acls) != 1 || acls[0].Err != nil {
		t.Fatalf("create an ACL: %v %+v", err, acls)
	}
	scram, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: e.user, Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "probe-secret"}})
	if err != nil || scram[e.user].Err != nil {
		t.Fatalf("create a SCRAM credential: %v %+v", err, scram)
	}
	quotas, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &e.user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}},
	}})
	if err != nil || len(quotas) != 1 || quotas[0].Err != nil {
		t.Fatalf("set a quota: %v %+v", err, quotas)
	}
	ia := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeBroker // name "": the cluster default
	rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	rc.Name, rc.Value = "log.retention.ms", kmsg.StringPtr("604800001")
	res.Configs = append(res.Configs, rc)
	ia.Resources = append(ia.Resources, res)
	iar := spAdminReq[*kmsg.IncrementalAlterConfigsResponse](t, ctx, cl, ia)
	if len(iar.Resources) != 1 || iar.Resources[0].ErrorCode != 0 {
		t.Fatalf("set a dynamic broker config: %+v", iar.Resources)
	}

	// The group's offset and the transactional producer go through their
	// coordinators, which may still be loading: kgo routes, the loop retries.
	for {
		offs := kadm.Offsets{e.topic: {0: {Topic: e.topic, Partition: 0, At: 1, LeaderEpoch: -1}}}
		r, err := adm.CommitOffsets(ctx, e.group, offs)
		if err == nil {
			err = r.Error()
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("commit an offset for %s: %v", e.group, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = &e.txn, 60000
		resp, err := ip.RequestWith(ctx, cl)
		if err == nil && resp.ErrorCode == 0 {
			e.pid, e.epoch = resp.ProducerID, resp.ProducerEpoch
			break
		}
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if ctx.Err() != nil || !kerr.IsRetriable(err) {
			t.Fatalf("initialise the transactional producer %s: %v", e.txn, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fjord-security-probe", "1.0"
	for _, f := range spAdminReq[*kmsg.ApiVersionsResponse](t, ctx, cl, av).FinalizedFeatures {
		if f.Name == "metadata.version" {
			e.mvLevel = f.MaxVersionLevel
		}
	}
	if e.mvLevel == 0 {
		t.Fatal("ApiVersions finalizes no metadata.version")
	}
	return e
}

// spAdminReq sends req as the set-up's admin client (to the seed broker,
// the only node) and fails the test on a transport error.
func spAdminReq[R kmsg.Response](t *testing.T, ctx context.Context, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	r, err := direct[R](ctx, cl, req)
	if err != nil {
		t.Fatalf("%s as admin: %v", kmsg.NameForKey(req.Key()), err)
	}
	return r
}

// spAdvertised asks the listener's ApiVersions, as the caller, which keys
// it serves.
func spAdvertised(t *testing.T, ctx context.Context, addr string, opts []kgo.Opt) []kmsg.ApiVersionsResponseApiKey {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fjord-security-probe", "1.0"
	resp, err := spSend(ctx, addr, opts, av)
	if err != nil {
		t.Fatalf("ApiVersions on %s: %v", addr, err)
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("ApiVersions on %s: %v", addr, kerr.ErrorForCode(r.ErrorCode))
	}
	keys := slices.Clone(r.ApiKeys)
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// spSend sends req on a connection of its own (what one request does to
// its connection cannot touch the next), through kgo, which picks the
// highest version both it and the listener speak.
func spSend(ctx context.Context, addr string, opts []kgo.Opt, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		kgo.SoftwareNameAndVersion("fjord-security-probe", "1.0"), kgo.ClientID("fjord-security-probe"), kgo.MaxVersions(spVersions())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return cl.SeedBrokers()[0].Request(c, req)
}

// spAttack is one request a caller sends, and Kafka's answer to it.
type spAttack struct {
	what string
	req  func(*spEnv) kmsg.Request
	want spOutcome
}

// spOutcome is the answer Kafka gives.
//
// Invariant: at most one of allowed and closed; a denial (neither) has
// codes or a check that says where the authorization error is.
type spOutcome struct {
	// allowed: Kafka checks no ACL here (or only filters what it lists):
	// the answer carries no authorization error and the connection stays.
	allowed bool
	// closed: Kafka closes the connection without an answer; with codes,
	// an answer carrying them (a refusal before the close) is as good.
	closed bool
	// codes: a denial's error codes, where Kafka puts them.
	codes []spCodeAt
	// check, if set, says what else the answer must (not) show: that a
	// denial leaks nothing, that a listing lists nothing, or that the
	// admin's request did what it asked.
	check func(*spEnv, kmsg.Response) string
}

// spCodeAt is an error code at the response fields path matches; path
// is Go field names as kmsg spells them, with [i] or [*] (every element)
// for list elements: "Topics[*].Partitions[*].ErrorCode".
type spCodeAt struct {
	path string
	code int16
}

var (
	spTopicDenied   = kerr.TopicAuthorizationFailed.Code
	spGroupDenied   = kerr.GroupAuthorizationFailed.Code
	spClusterDenied = kerr.ClusterAuthorizationFailed.Code
	spTxnDenied     = kerr.TransactionalIDAuthorizationFailed.Code
	// spAuthzCodes are the codes of an authorization refusal.
	spAuthzCodes = []int16{spTopicDenied, spGroupDenied, spClusterDenied, spTxnDenied,
		kerr.DelegationTokenAuthorizationFailed.Code}
)

// spBeforeAuth is Kafka's answer on a SASL listener before
// authentication: ApiVersions and SaslHandshake are served, anything else
// closes the connection (SaslServerAuthenticator). Fjord answers a
// SaslAuthenticate without a handshake ILLEGAL_SASL_STATE before it
// closes (sasl_test.go holds it to that): a refusal all the same.
func spBeforeAuth(key int16) spOutcome {
	switch key {
	case 17, 18:
		return spOutcome{allowed: true}
	case 36:
		return spOutcome{closed: true, codes: []spCodeAt{{"ErrorCode", kerr.IllegalSaslState.Code}}}
	}
	return spOutcome{closed: true}
}

// judge compares an answer with o: "" when it matches, else what is
// wrong; closed reports that the connection was closed instead.
func (o spOutcome) judge(e *spEnv, resp kmsg.Response, err error) (msg string, closed bool) {
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return fmt.Sprintf("no answer: %v", err), false
		}
		if o.allowed {
			return fmt.Sprintf("allowed in Kafka, but the connection was closed: %v", err), true
		}
		return "", true // closed: refused
	}
	codes := spCodes(resp)
	if o.closed && len(o.codes) == 0 {
		return fmt.Sprintf("Kafka closes the connection; answered %s", spFmtCodes(codes)), false
	}
	if o.allowed {
		for _, c := range codes {
			if slices.Contains(spAuthzCodes, c.code) {
				return fmt.Sprintf("allowed in Kafka, refused here: %s", spFmtCodes(codes)), false
			}
		}
	}
	for _, w := range o.codes {
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(w.path), `\[\*\]`, `\[\d+\]`) + "$")
		n := 0
		for _, c := range codes {
			if re.MatchString(c.path) {
				n++
				if c.code != w.code {
					return fmt.Sprintf("%s is %d (%s), Kafka answers %d (%s); the answer: %s", c.path, c.code, spCodeName(c.code),
						w.code, spCodeName(w.code), spFmtCodes(codes)), false
				}
			}
		}
		if n == 0 {
			return fmt.Sprintf("no %s in the answer, Kafka puts %s there; the answer: %s", w.path, spCodeName(w.code), spFmtCodes(codes)), false
		}
	}
	if o.check != nil {
		if m := o.check(e, resp); m != "" {
			return m, false
		}
	}
	return "", false
}

type spCode struct {
	path string
	code int16
}

// spCodes lists every ErrorCode field of resp with its path.
func spCodes(resp kmsg.Response) []spCode {
	var out []spCode
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				p := f.Name
				if path != "" {
					p = path + "." + f.Name
				}
				if f.Name == "ErrorCode" && v.Field(i).Kind() == reflect.Int16 {
					out = append(out, spCode{p, int16(v.Field(i).Int())})
					continue
				}
				walk(v.Field(i), p)
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(reflect.ValueOf(resp), "")
	return out
}

func spFmtCodes(cs []spCode) string {
	if len(cs) == 0 {
		return "no error code field"
	}
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", c.path, spCodeName(c.code))
	}
	return b.String()
}

func spCodeName(code int16) string {
	if code == 0 {
		return "0"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return fmt.Sprint(code)
}

// spSnapshot describes, as admin, everything an attack aims at, as
// "what" -> value facts, error codes among them (after a successful
// attack, a description may fail). Groups and transactions admin's own
// harmless requests name (spAdminName...) are left out.
func spSnapshot(t *testing.T, ctx context.Context, cl *kgo.Client, e *spEnv) map[string]string {
	t.Helper()
	s := map[string]string{}

	md := spAdminReq[*kmsg.MetadataResponse](t, ctx, cl, kmsg.NewPtrMetadataRequest())
	names := map[[16]byte]string{} // OffsetFetch v10 names topics by id
	for _, tp := range md.Topics {
		name := *tp.Topic
		names[tp.TopicID] = name
		s["topic "+name] = fmt.Sprintf("id=%x partitions=%d error=%s", tp.TopicID, len(tp.Partitions), spCodeName(tp.ErrorCode))
		for _, p := range tp.Partitions {
			s[fmt.Sprintf("partition %s/%d", name, p.Partition)] = fmt.Sprintf("leader=%d epoch=%d replicas=%v isr=%v",
				p.Leader, p.LeaderEpoch, p.Replicas, p.ISR)
		}
	}

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeFencedBrokers = true
	dcr := spAdminReq[*kmsg.DescribeClusterResponse](t, ctx, cl, dc)
	s["cluster"] = fmt.Sprintf("id=%s controller=%d error=%s", dcr.ClusterID, dcr.ControllerID, spCodeName(dcr.ErrorCode))
	for _, b := range dcr.Brokers {
		s[fmt.Sprintf("broker %d", b.NodeID)] = fmt.Sprintf("%s:%d fenced=%v", b.Host, b.Port, b.IsFenced)
	}

	da := spDescribeAllACLs()
	dar := spAdminReq[*kmsg.DescribeACLsResponse](t, ctx, cl, da)
	s["acls"] = spCodeName(dar.ErrorCode)
	for _, r := range dar.Resources {
		for _, a := range r.ACLs {
			s[fmt.Sprintf("acl %s:%s:%s %s@%s %s %s", r.ResourceType, r.ResourcePatternType, r.ResourceName,
				a.Principal, a.Host, a.Operation, a.PermissionType)] = ""
		}
	}

	dcf := kmsg.NewPtrDescribeConfigsRequest()
	for _, r := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeBroker, ""}, {kmsg.ConfigResourceTypeBroker, "1"}, {kmsg.ConfigResourceTypeTopic, e.topic}} {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = r.typ, r.name
		dcf.Resources = append(dcf.Resources, rr)
	}
	for _, r := range spAdminReq[*kmsg.DescribeConfigsResponse](t, ctx, cl, dcf).Resources {
		s[fmt.Sprintf("configs %s %q", r.ResourceType, r.ResourceName)] = spCodeName(r.ErrorCode)
		for _, c := range r.Configs {
			s[fmt.Sprintf("config %s %q %s", r.ResourceType, r.ResourceName, c.Name)] = fmt.Sprintf("%s (%s)", spDeref(c.Value), c.Source)
		}
	}

	for _, r := range spAdminReq[*kmsg.DescribeUserSCRAMCredentialsResponse](t, ctx, cl, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).Results {
		for _, c := range r.CredentialInfos {
			s[fmt.Sprintf("scram %s %d", r.User, c.Mechanism)] = fmt.Sprintf("iterations=%d", c.Iterations)
		}
		if r.ErrorCode != 0 {
			s["scram "+r.User] = spCodeName(r.ErrorCode)
		}
	}

	dq := spAdminReq[*kmsg.DescribeClientQuotasResponse](t, ctx, cl, kmsg.NewPtrDescribeClientQuotasRequest())
	s["quotas"] = spCodeName(dq.ErrorCode)
	for _, q := range dq.Entries {
		var ent, vals []string
		for _, en := range q.Entity {
			ent = append(ent, en.Type+"="+spDeref(en.Name))
		}
		for _, v := range q.Values {
			vals = append(vals, fmt.Sprintf("%s=%v", v.Key, v.Value))
		}
		sort.Strings(ent)
		sort.Strings(vals)
		s["quota "+strings.Join(ent, ",")] = strings.Join(vals, ",")
	}

	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "fjord-security-probe", "1.0"
	for _, f := range spAdminReq[*kmsg.ApiVersionsResponse](t, ctx, cl, av).FinalizedFeatures {
		s["feature "+f.Name] = fmt.Sprintf("%d-%d", f.MinVersionLevel, f.MaxVersionLevel)
	}

	lg := spAdminReq[*kmsg.ListGroupsResponse](t, ctx, cl, kmsg.NewPtrListGroupsRequest())
	for _, g := range lg.Groups {
		if !strings.HasPrefix(g.Group, spAdminName) {
			s["group "+g.Group] = g.ProtocolType
		}
	}
	of := kmsg.NewPtrOffsetFetchRequest()
	og := kmsg.NewOffsetFetchRequestGroup()
	og.Group = e.group
	of.Groups = append(of.Groups, og)
	for _, g := range spAdminReq[*kmsg.OffsetFetchResponse](t, ctx, cl, of).Groups {
		s["group offsets "+g.Group] = spCodeName(g.ErrorCode)
		for _, tp := range g.Topics {
			if tp.Topic == "" {
				tp.Topic = names[tp.TopicID]
			}
			for _, p := range tp.Partitions {
				s[fmt.Sprintf("offset %s %s/%d", g.Group, tp.Topic, p.Partition)] = fmt.Sprintf("%d %s", p.Offset, spCodeName(p.ErrorCode))
			}
		}
	}

	lt := spAdminReq[*kmsg.ListTransactionsResponse](t, ctx, cl, kmsg.NewPtrListTransactionsRequest())
	for _, x := range lt.TransactionStates {
		if !strings.HasPrefix(x.TransactionalID, spAdminName) {
			s["txn "+x.TransactionalID] = fmt.Sprintf("pid=%d", x.ProducerID)
		}
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{e.txn}
	for _, x := range spAdminReq[*kmsg.DescribeTransactionsResponse](t, ctx, cl, dt).TransactionStates {
		s["txn state "+x.TransactionalID] = fmt.Sprintf("pid=%d epoch=%d state=%s error=%s", x.ProducerID, x.ProducerEpoch, x.State, spCodeName(x.ErrorCode))
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lot := kmsg.NewListOffsetsRequestTopic()
	lot.Topic = e.topic
	for p := range int32(2) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -2 // earliest
		lot.Partitions = append(lot.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lot)
	for _, tp := range spAdminReq[*kmsg.ListOffsetsResponse](t, ctx, cl, lo).Topics {
		for _, p := range tp.Partitions {
			s[fmt.Sprintf("log start %s/%d", tp.Topic, p.Partition)] = fmt.Sprintf("%d %s", p.Offset, spCodeName(p.ErrorCode))
		}
	}
	return s
}

// spCheckSetUp: the snapshot before the probe shows what the set-up made,
// so that a fact the attacks aim at cannot be missing from both
// snapshots alike.
func spCheckSetUp(t *testing.T, s map[string]string, e *spEnv) {
	t.Helper()
	for what, want := range map[string]string{
		"topic " + e.topic: fmt.Sprintf("id=%x partitions=2 error=0", e.topicID),
		"acl TOPIC:LITERAL:" + e.topic + " User:carol@* READ ALLOW": "",
		fmt.Sprintf("config BROKER %q log.retention.ms", ""):        "604800001 (DYNAMIC_DEFAULT_BROKER_CONFIG)",
		fmt.Sprintf("config BROKER %q super.users", "1"):            "User:admin (STATIC_BROKER_CONFIG)",
		fmt.Sprintf("config TOPIC %q retention.ms", e.topic):        e.retention + " (DYNAMIC_TOPIC_CONFIG)",
		fmt.Sprintf("scram %s 1", e.user):                           "iterations=8192",
		"quota user=" + e.user:                                      fmt.Sprintf("producer_byte_rate=%v", float64(1<<20)),
		"broker 1":                                                  s["broker 1"], // present
		fmt.Sprintf("offset %s %s/0", e.group, e.topic):             "1 0",
		"txn state " + e.txn:                                        fmt.Sprintf("pid=%d epoch=%d state=Empty error=0", e.pid, e.epoch),
		fmt.Sprintf("log start %s/0", e.topic):                      "0 0",
	} {
		if got, ok := s[what]; !ok || got != want {
			t.Fatalf("before the probe, %s is %q (present: %v), want %q", what, got, ok, want)
		}
	}
}

func spDeref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// spDiff lists what differs between two snapshots.
func spDiff(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			out = append(out, fmt.Sprintf("%s (%s) is gone", k, v))
		} else if w != v {
			out = append(out, fmt.Sprintf("%s: %q, was %q", k, w, v))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			out = append(out, fmt.Sprintf("%s (%s) is new", k, v))
		}
	}
	sort.Strings(out)
	return out
}

// spAuditWant is an audit line a refused mutation must have left.
type spAuditWant struct {
	principal string
	ctl       bool
	key       int16
	what      string
}

// spCheckAudit waits (bounded) for an audit line for every refused
// mutation: "audit":true, the principal, the listener kind and the key.
func spCheckAudit(t *testing.T, logs *syncBuffer, wants []spAuditWant) {
	t.Helper()
	type line struct {
		Audit     bool   `json:"audit"`
		Principal string `json:"principal"`
		Listener  string `json:"listener"`
		Key       int16  `json:"api_key"`
		Outcome   string `json:"outcome"`
	}
	var missing []spAuditWant
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		seen := map[spAuditWant]bool{}
		for _, raw := range strings.Split(logs.String(), "\n") {
			var l line
			if !strings.Contains(raw, `"audit":true`) || json.Unmarshal([]byte(raw), &l) != nil || !l.Audit {
				continue
			}
			if l.Outcome == "ok" {
				continue
			}
			seen[spAuditWant{principal: l.Principal, ctl: l.Listener == "controller", key: l.Key}] = true
		}
		missing = missing[:0]
		for _, w := range wants {
			if !seen[spAuditWant{principal: w.principal, ctl: w.ctl, key: w.key}] {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range missing {
		t.Errorf("no audit line for the refused mutation %s", w.what)
	}
}
