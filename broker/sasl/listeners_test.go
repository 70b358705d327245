package sasl

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordlog/fjord/controller"
)

const plainJAAS = PlainLoginModule + ` required username="node" password="node-secret" user_node="node-secret";`

// Build gives each SASL client listener its server (indexed as the
// listeners are, nil for the others), the CONTROLLER listener its server
// on a controller and this node's identity towards it on every node, and
// a broker its inter-broker identity; a listener that accepts unsigned
// OAUTHBEARER tokens is warned of once, by name.
func TestBuildListeners(t *testing.T) {
	settings := Settings{EnabledMechanisms: "PLAIN", InterBrokerMechanism: "PLAIN", ControllerMechanism: "PLAIN", JAASConfig: plainJAAS,
		Listener: map[string]string{
			"listener.name.dev.sasl.enabled.mechanisms":                        "OAUTHBEARER",
			"listener.name.dev.oauthbearer.sasl.server.callback.handler.class": OAuthUnsecuredHandler,
		}}
	var logs bytes.Buffer
	type denial struct {
		listener int
		mech     string
	}
	var denied []denial
	cfg := ListenerConfig{Settings: settings,
		Client:     []Listener{{"PLAINTEXT", "PLAINTEXT"}, {"SSL", "SSL"}, {"DEV", "SASL_PLAINTEXT"}, {"SECURE", "SASL_SSL"}},
		Controller: "CONTROLLER", ControllerProtocol: "SASL_PLAINTEXT", ServeController: true,
		InterBroker: "SECURE", InterBrokerProtocol: "SASL_SSL", Broker: true,
		Denied: func(listener int, _ net.Addr, mech, _ string) { denied = append(denied, denial{listener, mech}) },
		Log:    zerolog.New(&logs),
	}
	l, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l.Servers[0] != nil || l.Servers[1] != nil || l.Servers[2] == nil || l.Servers[3] == nil {
		t.Fatalf("servers %v: want one for DEV and SECURE only", l.Servers)
	}
	if !l.Servers[2].AcceptsUnsigned() || l.Servers[3].AcceptsUnsigned() {
		t.Error("only DEV asked for unsigned tokens")
	}
	if l.Controller == nil || l.ControllerClient == nil || l.InterBroker == nil {
		t.Errorf("controller server %v, controller identity %v, inter-broker identity %v: want all three", l.Controller, l.ControllerClient, l.InterBroker)
	}
	if n := strings.Count(logs.String(), "accepts unsigned tokens"); n != 1 || !strings.Contains(logs.String(), `"listener":"DEV"`) {
		t.Errorf("%d unsigned-token warnings, want one naming DEV:\n%s", n, logs.String())
	}
	if n := len(l.Runs(context.Background())); n != 3 {
		t.Errorf("%d background loops, want one per server (3)", n)
	}

	// A refused PLAIN login is reported with its listener: an index of
	// Client, or -1 on the CONTROLLER listener.
	for _, srv := range []*Server{l.Servers[3], l.Controller} {
		x, err := srv.Start("PLAIN", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := x.Step([]byte("\x00node\x00wrong")); err == nil {
			t.Fatal("a wrong password was accepted")
		}
	}
	if len(denied) != 2 || denied[0] != (denial{3, "PLAIN"}) || denied[1] != (denial{-1, "PLAIN"}) {
		t.Errorf("denials %v, want SECURE's (3) then the CONTROLLER listener's (-1)", denied)
	}

	// A broker-only node dials the controllers but serves no CONTROLLER
	// listener; a controller-only node has no inter-broker identity.
	cfg.ServeController = false
	if l, err := Build(cfg); err != nil || l.Controller != nil || l.ControllerClient == nil {
		t.Errorf("broker-only: %v, controller server %v, identity %v", err, l.Controller, l.ControllerClient)
	}
	cfg.ServeController, cfg.Broker = true, false
	if l, err := Build(cfg); err != nil || l.InterBroker != nil {
		t.Errorf("controller-only: %v, inter-broker identity %v", err, l.InterBroker)
	}
}

// A listener Build cannot secure stops start-up, naming it.
func TestBuildListenersRefuses(t *testing.T) {
	base := func() ListenerConfig {
		return ListenerConfig{Settings: Settings{EnabledMechanisms: "PLAIN", InterBrokerMechanism: "PLAIN", ControllerMechanism: "PLAIN", JAASConfig: plainJAAS},
			Client: []Listener{{"CLIENT", "SASL_PLAINTEXT"}}, Controller: "CONTROLLER", ControllerProtocol: "PLAINTEXT",
			InterBroker: "CLIENT", InterBrokerProtocol: "SASL_PLAINTEXT", Broker: true, Log: zerolog.Nop()}
	}
	for _, tc := range []struct {
		name string
		edit func(*ListenerConfig)
		want string
	}{
		{"an unknown protocol", func(c *ListenerConfig) { c.Client[0].Protocol = "KERBEROS" }, "listener CLIENT: security protocol KERBEROS is not served"},
		{"OAUTHBEARER that can check no token", func(c *ListenerConfig) { c.Settings.EnabledMechanisms = "OAUTHBEARER" }, "listener CLIENT: OAUTHBEARER"},
		{"SCRAM without credentials", func(c *ListenerConfig) { c.Settings.EnabledMechanisms = "SCRAM-SHA-256" }, "needs the SCRAM credentials"},
		{"an inter-broker mechanism a node cannot present", func(c *ListenerConfig) { c.Settings.InterBrokerMechanism = "GSSAPI" }, "inter-broker listener CLIENT (sasl.mechanism.inter.broker.protocol GSSAPI)"},
		{"a controller mechanism a node cannot present", func(c *ListenerConfig) {
			c.ControllerProtocol, c.Settings.ControllerMechanism = "SASL_SSL", "GSSAPI"
		}, "controller listener CONTROLLER (sasl.mechanism.controller.protocol GSSAPI)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			if _, err := Build(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want %q", err, tc.want)
			}
		})
	}
}

func scramImage(t *testing.T, creds ...controller.ScramCredential) *controller.Image {
	t.Helper()
	img := &controller.Image{}
	for i, c := range creds {
		next, err := img.Apply(uint64(i+1), controller.NewRecord(c))
		if err != nil {
			t.Fatal(err)
		}
		img = next
	}
	return img
}

// ImageScram reads the image current at each exchange; no image, no
// credential.
func TestImageScram(t *testing.T) {
	var img *controller.Image
	lookup := ImageScram(func() *controller.Image { return img })
	if _, ok := lookup("SCRAM-SHA-256", "alice"); ok {
		t.Error("a credential without an image")
	}
	img = scramImage(t, controller.ScramCredential{User: "alice", Mechanism: controller.ScramSHA256, Salt: []byte("salt"),
		StoredKey: []byte("st"), ServerKey: []byte("sv"), Iterations: 4096})
	s, ok := lookup("SCRAM-SHA-256", "alice")
	if !ok || string(s.Salt) != "salt" || string(s.StoredKey) != "st" || string(s.ServerKey) != "sv" || s.Iterations != 4096 {
		t.Errorf("alice's SCRAM-SHA-256: %+v %v", s, ok)
	}
	if _, ok := lookup("SCRAM-SHA-512", "alice"); ok {
		t.Error("alice has no SCRAM-SHA-512 credential")
	}
}

// BootstrapScram creates only the credentials that do not exist, retries
// while the controller cannot be reached or refuses, and stops when ctx
// ends.
func TestBootstrapScram(t *testing.T) {
	value := "SCRAM-SHA-256=[name=admin,password=admin-secret];SCRAM-SHA-512=[name=ops,password=ops-secret,iterations=8192]"
	have := func(mechanism, user string) (ScramSecret, bool) { return ScramSecret{}, user == "admin" }
	var sent []*kmsg.AlterUserSCRAMCredentialsRequest
	answers := []error{errors.New("no controller"), nil}
	alter := func(_ context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsResponse, error) {
		sent = append(sent, req)
		err := answers[0]
		answers = answers[1:]
		return kmsg.NewPtrAlterUserSCRAMCredentialsResponse(), err
	}
	var logs bytes.Buffer
	BootstrapScram(context.Background(), value, have, alter, zerolog.New(&logs))
	if len(sent) != 2 {
		t.Fatalf("%d requests, want 2 (one retry)", len(sent))
	}
	ups := sent[1].Upsertions
	if len(ups) != 1 || ups[0].Name != "ops" || ups[0].Mechanism != int8(controller.ScramSHA512) || ups[0].Iterations != 8192 ||
		len(ups[0].Salt) != 32 || len(ups[0].SaltedPassword) != 64 {
		t.Errorf("upsertions %+v: want ops's SCRAM-SHA-512 only", ups)
	}
	if !strings.Contains(logs.String(), "SCRAM bootstrap credentials created") {
		t.Errorf("no success line:\n%s", logs.String())
	}

	// Everything exists: nothing is sent.
	sent = nil
	BootstrapScram(context.Background(), value, func(string, string) (ScramSecret, bool) { return ScramSecret{}, true }, alter, zerolog.Nop())
	if len(sent) != 0 {
		t.Errorf("%d requests for existing credentials", len(sent))
	}
	// Refused, and ctx ends during the backoff.
	ctx, cancel := context.WithCancel(context.Background())
	refuse := func(_ context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) (*kmsg.AlterUserSCRAMCredentialsResponse, error) {
		sent = append(sent, req)
		cancel()
		resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = "ops", 58
		resp.Results = append(resp.Results, r)
		return resp, nil
	}
	BootstrapScram(ctx, value, have, refuse, zerolog.Nop())
	if len(sent) != 1 {
		t.Errorf("%d requests after ctx ended, want 1", len(sent))
	}
}
