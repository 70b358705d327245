package config

import (
	"strings"
	"testing"
)

// Listener names are matched as Kafka matches them, and a name that has no
// security protocol stops start-up with an error naming it.
func TestListenerNames(t *testing.T) {
	type cfgFn func(*Config)
	set := func(listeners, adv, protoMap string) cfgFn {
		return func(c *Config) {
			c.Listeners, c.AdvertisedListeners, c.ListenerSecurityProtocolMap = listeners, adv, protoMap
		}
	}
	and := func(fs ...cfgFn) cfgFn {
		return func(c *Config) {
			for _, f := range fs {
				f(c)
			}
		}
	}
	tests := []struct {
		name string
		cfg  cfgFn
		// want maps listener names (as a caller might spell them) to the
		// protocol ListenerProtocol must give; empty when the
		// configuration is refused.
		want map[string]string
		// errs are the texts the refusal must hold, each naming the
		// listener.
		errs []string
	}{
		{"zero config", func(*Config) {}, map[string]string{"PLAINTEXT": "PLAINTEXT", "CONTROLLER": "PLAINTEXT"}, nil},
		{"protocol names need no map, in any case", set("plaintext://127.0.0.1:0,Sasl_Ssl://127.0.0.1:0", "", ""),
			map[string]string{"PLAINTEXT": "PLAINTEXT", "sasl_ssl": "SASL_SSL", "SASL_SSL": "SASL_SSL"}, nil},
		{"map keys are upper-cased", set("CLIENT://127.0.0.1:0", "", "client:sasl_ssl"),
			map[string]string{"CLIENT": "SASL_SSL", "client": "SASL_SSL"}, nil},
		{"listener names are upper-cased", set("client://127.0.0.1:0,internal://127.0.0.1:0", "", "CLIENT:SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"),
			map[string]string{"CLIENT": "SSL", "Internal": "PLAINTEXT"}, nil},
		{"inter.broker.listener.name is upper-cased", and(set("CLIENT://127.0.0.1:0,REPL://127.0.0.1:0", "", "CLIENT:SSL,REPL:PLAINTEXT"),
			func(c *Config) { c.InterBrokerListenerName = "repl" }), map[string]string{"REPL": "PLAINTEXT"}, nil},
		{"an unmapped name without a map", set("PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0", "", ""), nil,
			[]string{"no security protocol defined for listener INTERNAL (named in listeners)", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:<PROTOCOL>"}},
		{"an unmapped name in a map", set("PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0", "", "PLAINTEXT:PLAINTEXT"), nil,
			[]string{"no security protocol defined for listener INTERNAL (named in listeners) in listener.security.protocol.map"}},
		{"an unmapped advertised name", set("PLAINTEXT://127.0.0.1:0", "EXTERNAL://a.example:9092", "PLAINTEXT:PLAINTEXT"), nil,
			[]string{"listener EXTERNAL (named in advertised.listeners)"}},
		// On a broker it would also not be a listener; Kafka looks its
		// protocol up on a controller too.
		{"an unmapped inter-broker name", and(set("CONTROLLER://127.0.0.1:0", "", "CONTROLLER:PLAINTEXT"),
			func(c *Config) { c.ProcessRoles, c.InterBrokerListenerName = "controller", "repl" }), nil,
			[]string{"listener REPL (named in inter.broker.listener.name)"}},
		// Kafka maps a KRaft node's controller listeners to PLAINTEXT by
		// itself only when the map is not given and nothing is named SSL
		// or SASL_*.
		{"controller listener with no map, plaintext cluster", set("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", ""),
			map[string]string{"CONTROLLER": "PLAINTEXT"}, nil},
		{"controller listener with no map, SASL cluster", set("SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", ""), nil,
			[]string{"no security protocol defined for listener CONTROLLER (named in listeners)", "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:<PROTOCOL>"}},
		{"controller listener left out of a map", set("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", "PLAINTEXT:PLAINTEXT"), nil,
			[]string{"listener CONTROLLER (named in listeners)"}},
		{"a broker's controller listener is not its own", and(set("CLIENT://127.0.0.1:0", "", "CLIENT:PLAINTEXT"), func(c *Config) {
			c.ProcessRoles, c.ControllerQuorumVoters = "broker", "9@127.0.0.1:1"
		}), nil, []string{"listener CONTROLLER (named in controller.listener.names)"}},
		{"a lower-case controller.listener.names entry", and(set("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
			func(c *Config) { c.ControllerListenerNames = "controller" }), nil, []string{`controller.listener.names "controller"`, "write CONTROLLER"}},
		{"a name mapped twice", set("CLIENT://127.0.0.1:0", "", "client:SSL,CLIENT:PLAINTEXT"), nil,
			[]string{"listener CLIENT is given twice, as SSL and as PLAINTEXT"}},
		{"a name mapped twice alike", set("CLIENT://127.0.0.1:0", "", "client:SSL,CLIENT:ssl"), map[string]string{"CLIENT": "SSL"}, nil},
		{"a listener named twice", set("client://127.0.0.1:0,CLIENT://127.0.0.1:0", "", "CLIENT:SSL"), nil,
			[]string{"listener CLIENT is named twice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.cfg(&c)
			err := c.Validate()
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, e := range tt.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q\n lacks %q", err, e)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					// One line per mistake: this table has one mistake a case.
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.want {
				if got := c.ListenerProtocol(name); got != want {
					t.Errorf("ListenerProtocol(%q) = %q, want %q", name, got, want)
				}
			}
		})
	}
}

// Every listener without a protocol gets its own line, each pasteable fix
// naming all listeners.
func TestListenerNamesEachMissing(t *testing.T) {
	c := Default()
	c.Listeners = "SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0,OPS://127.0.0.1:0"
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "listener INTERNAL ") || !strings.Contains(lines[1], "listener OPS ") {
		t.Fatalf("%q", lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, "listener.security.protocol.map=SSL:SSL,INTERNAL:<PROTOCOL>,OPS:<PROTOCOL>") {
			t.Errorf("fix: %q", l)
		}
	}
}
