package compattests

// SCRAM-SHA-256 and SCRAM-SHA-512 with librdkafka: kcat 1.7.1 and
// confluent-kafka-python 1.7 (Debian bookworm's, both on librdkafka 2.0.2).
// librdkafka before 2.6.1 puts its own nonce in front of the server's
// whole nonce in the client-final message (r=<c-nonce><c-nonce><s-nonce>),
// which Kafka 3.8.1 and later accept; a broker that demands the exact
// nonce refuses every such login (issue 24).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSASLScramLibrdkafka: a user created with AlterUserSCRAMs (as in
// TestSASLScram) produces and consumes with kcat and with
// confluent-kafka-python, over each SCRAM mechanism; the same clients
// with a wrong password are refused for bad credentials.
func TestSASLScramLibrdkafka(t *testing.T) {
	b, addr := scramBroker(t, t.TempDir())
	ctx := testCtx(t, 30*time.Second)

	// The bootstrap runs once the node serves: wait for it (bounded).
	admin := scramMech("admin", "admin-secret", true)
	var err error
	for ctx.Err() == nil {
		if err = pingWith(t, addr, admin); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bootstrapped admin (SCRAM-SHA-512): %v", err)
	}
	const user, pass = "carol", "carol-secret"
	altered, err := kadm.NewClient(newClient(t, addr, kgo.SASL(admin))).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: pass},
	})
	if err != nil || altered[user].Err != nil {
		t.Fatalf("AlterUserSCRAMs %s: %v %+v", user, err, altered)
	}
	// franz-go sends the exact nonce: the user is in place once it logs in.
	for _, sha512 := range []bool{false, true} {
		for ctx.Err() == nil {
			if err = pingWith(t, addr, scramMech(user, pass, sha512)); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s with franz-go (sha512 %v): %v", user, sha512, err)
		}
	}
	plainAdm := newAdmin(t, b.Addr)
	mechs := []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

	t.Run("kcat", func(t *testing.T) {
		kcat := kcatPath(t)
		t.Logf("%s", versionLine(runKcat(t, kcat, "", "-V")))
		for _, mech := range mechs {
			t.Run(mech, func(t *testing.T) {
				sasl := func(pass string) []string {
					return []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
						"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass}
				}
				topic := "kcat-" + strings.ToLower(mech)
				createTopic(t, plainAdm, topic, 1, nil)
				var want []string
				for i := range 20 {
					want = append(want, fmt.Sprintf("%s-%d", mech, i))
				}
				// message.timeout.ms: a refused login fails the delivery
				// within runKcat's 30 s instead of retrying for 300 s.
				runKcat(t, kcat, strings.Join(want, "\n")+"\n",
					slices.Concat([]string{"-P", "-b", addr, "-t", topic, "-X", "acks=all", "-X", "message.timeout.ms=15000"}, sasl(pass))...)
				out := runKcat(t, kcat, "", slices.Concat([]string{"-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-f", `%s\n`}, sasl(pass))...)
				if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); !slices.Equal(got, want) {
					t.Errorf("kcat read back %q, want %q", got, want)
				}

				// kcat ends once every broker connection is down, here
				// after the first refused login.
				stdout, stderr, err := runKcatErr(kcat, "refused\n",
					slices.Concat([]string{"-P", "-b", addr, "-t", topic, "-X", "message.timeout.ms=15000"}, sasl("wrong"))...)
				if err == nil || !refusedForCredentials(stderr) {
					t.Errorf("kcat -P with a wrong password: %v, want a failure naming the credentials\nstdout:\n%s\nstderr:\n%s", err, tail(stdout), tail(stderr))
				}
			})
		}
	})

	t.Run("confluent-kafka", func(t *testing.T) {
		py := confluentPython(t)
		script, err := filepath.Abs("testdata/confluent_scram.py")
		if err != nil {
			t.Fatal(err)
		}
		// run runs the script with the password on stdin (killed after
		// 45 s) and decodes its JSON line into out.
		run := func(t *testing.T, out any, password string, args ...string) {
			t.Helper()
			cmdCtx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cmdCtx, py, append([]string{script}, args...)...)
			cmd.Stdin = strings.NewReader(password)
			var stderr rdkBuffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			what := "confluent_scram.py " + strings.Join(args, " ")
			if cmdCtx.Err() != nil {
				t.Fatalf("%s: killed after 45 s\nstdout:\n%s\nstderr:\n%s", what, tail(string(stdout)), tail(stderr.String()))
			}
			if err != nil {
				t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, tail(string(stdout)), tail(stderr.String()))
			}
			if err := json.Unmarshal(stdout, out); err != nil {
				t.Fatalf("%s: %v in its output %q\nstderr:\n%s", what, err, tail(string(stdout)), tail(stderr.String()))
			}
		}
		type rdkError struct{ Name, Str string }
		for _, mech := range mechs {
			t.Run(mech, func(t *testing.T) {
				topic := "py-" + strings.ToLower(mech)
				createTopic(t, plainAdm, topic, 1, nil)
				var rt struct {
					Librdkafka string     `json:"librdkafka"`
					Acked      int        `json:"acked"`
					Values     []string   `json:"values"`
					Errors     []rdkError `json:"errors"`
				}
				run(t, &rt, pass, "roundtrip", addr, mech, user, topic, topic+"-g")
				t.Logf("confluent-kafka on librdkafka %s", rt.Librdkafka)
				var want []string
				for i := range 20 {
					want = append(want, fmt.Sprintf("%s-%d", mech, i))
				}
				if rt.Acked != 20 || !slices.Equal(rt.Values, want) {
					t.Errorf("confluent-kafka acked %d, read back %q, want %q (client errors %+v)", rt.Acked, rt.Values, want, rt.Errors)
				}

				var login struct {
					OK     bool       `json:"ok"`
					Error  *rdkError  `json:"error"`
					Errors []rdkError `json:"errors"`
				}
				run(t, &login, "wrong", "login", addr, mech, user)
				refused := slices.ContainsFunc(login.Errors, func(e rdkError) bool {
					return e.Name == "_AUTHENTICATION" && refusedForCredentials(e.Str)
				})
				if login.OK || !refused {
					t.Errorf("confluent-kafka with a wrong password: ok %v, error %+v, client errors %+v; want an _AUTHENTICATION error naming the credentials", login.OK, login.Error, login.Errors)
				}
			})
		}
	})
}

// refusedForCredentials reports whether a librdkafka error text is a SASL
// refusal for bad credentials (Fjord's "Invalid user credentials",
// Kafka's "... due to invalid credentials ..."), not for another reason
// such as the nonce.
func refusedForCredentials(s string) bool {
	return strings.Contains(strings.ToLower(s), "credentials")
}

// runKcatErr runs one kcat invocation (killed after 30 s) that may fail,
// returning its output and exit error.
func runKcatErr(kcat, stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("killed after 30 s: %w", err)
	}
	return o.String(), e.String(), err
}

// versionLine is the line of kcat -V that names kcat's and librdkafka's
// versions.
func versionLine(s string) string {
	for l := range strings.Lines(s) {
		if strings.HasPrefix(l, "Version ") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(s)
}
