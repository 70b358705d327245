package sasl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const jaasFile = `
// the apache image's layout
KafkaServer {
   org.apache.kafka.common.security.plain.PlainLoginModule required
   username="admin"
   password="admin-secret"
   user_admin="admin-secret"
   user_alice="al\"ice;{}";
};
/* a client section the broker does not read */
KafkaClient { org.apache.kafka.common.security.plain.PlainLoginModule required username=alice password="x"; };
`

func TestParseJAASFile(t *testing.T) {
	secs, err := ParseJAASFile(jaasFile)
	if err != nil {
		t.Fatal(err)
	}
	m := secs["KafkaServer"]
	if len(m) != 1 || m[0].Class != PlainLoginModule || m[0].Flag != "required" {
		t.Fatalf("KafkaServer = %+v", m)
	}
	if got := m[0].Options["user_alice"]; got != `al"ice;{}` {
		t.Errorf("user_alice = %q", got)
	}
	if got := secs["KafkaClient"][0].Options["username"]; got != "alice" {
		t.Errorf("unquoted value = %q", got)
	}
}

func TestParseJAASErrors(t *testing.T) {
	for _, bad := range []string{
		``,
		`org.x.Module required`,                 // no ';'
		`org.x.Module always a="b";`,            // bad flag
		`org.x.Module required a="b" a="c";`,    // duplicate option
		`org.x.Module required a=;`,             // no value
		`org.x.Module required a="unterminated`, // quote
	} {
		if _, err := ParseJAASConfig(bad); err == nil {
			t.Errorf("ParseJAASConfig(%q) accepted", bad)
		}
	}
	_, err := ParseJAASConfig(`org.x.Module required password "s3cret";`)
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v: want one that does not show the quoted value", err)
	}
	if _, err := ParseJAASFile(`KafkaServer { org.x.M required; }`); err == nil {
		t.Error("section without its ';' accepted")
	}
}

func TestModulesOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jaas.conf")
	if err := os.WriteFile(path, []byte(jaasFile), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Settings{EnabledMechanisms: "PLAIN", JAASFile: path, Listener: map[string]string{}}
	srv, err := NewServer(s, "SASL_PLAINTEXT", nil, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if srv.plain["admin"] != "admin-secret" || len(srv.plain) != 2 {
		t.Errorf("users from the file = %v", srv.plain)
	}
	s.JAASConfig = PlainLoginModule + ` required user_bob="b";`
	if srv, err = NewServer(s, "SASL_PLAINTEXT", nil, Hooks{}); err != nil || srv.plain["bob"] != "b" || len(srv.plain) != 1 {
		t.Errorf("sasl.jaas.config should win over the file: %v %v", srv, err)
	}
	s.Listener["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = PlainLoginModule + ` required username="c" password="cc" user_c="cc";`
	if srv, err = NewServer(s, "SASL_PLAINTEXT", nil, Hooks{}); err != nil || srv.plain["c"] != "cc" || len(srv.plain) != 1 {
		t.Errorf("the listener's key should win: %v %v", srv, err)
	}
	if u, p, err := s.Login("SASL_PLAINTEXT", "PLAIN"); u != "c" || p != "cc" || err != nil {
		t.Errorf("Login = %q %q %v", u, p, err)
	}
	s.Listener["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] = "PLAIN,GSSAPI"
	if _, err := NewServer(s, "SASL_PLAINTEXT", nil, Hooks{}); err == nil {
		t.Error("GSSAPI accepted")
	}
	if _, err := NewServer(Settings{}, "X", nil, Hooks{}); err == nil {
		t.Error("Kafka's default (GSSAPI) accepted")
	}
	if _, err := NewServer(Settings{EnabledMechanisms: "PLAIN"}, "X", nil, Hooks{}); err == nil {
		t.Error("PLAIN without users accepted")
	}
}

func TestPlainExchange(t *testing.T) {
	users := map[string]string{"alice": "pw"}
	for _, c := range []struct {
		msg string
		ok  bool
	}{
		{"\x00alice\x00pw", true},
		{"alice\x00alice\x00pw", true},
		{"bob\x00alice\x00pw", false}, // other authorization id
		{"\x00alice\x00pW", false},
		{"\x00bob\x00pw", false},
		{"\x00alice", false},
		{"\x00\x00pw", false},
		{"\x00alice\x00pw\x00", false},
	} {
		_, done, principal, _, err := (&plainExchange{users: users}).Step([]byte(c.msg))
		if (err == nil) != c.ok || done != c.ok || c.ok && principal != "User:alice" {
			t.Errorf("%q: done %v principal %q err %v", c.msg, done, principal, err)
		}
	}
}

func TestParseScramBootstrap(t *testing.T) {
	got, err := ParseScramBootstrap("SCRAM-SHA-256=[name=admin,password=a,b]")
	if err == nil {
		t.Errorf("a bare word accepted: %+v", got)
	}
	got, err = ParseScramBootstrap(`SCRAM-SHA-256=[name=admin,password="x=y"]; scram-sha-512=[name=b,password=p,iterations=8192]`)
	if err != nil || len(got) != 2 || got[0].Password != "x=y" || got[1].Mechanism != "SCRAM-SHA-512" || got[1].Iterations != 8192 || got[0].Iterations != 4096 {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"PLAIN=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[name=a,password=b", "SCRAM-SHA-256=[name=a,password=b,iterations=100]", "SCRAM-SHA-256=[name=a,password=hunter2,colour=red]"} {
		_, err := ParseScramBootstrap(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}
