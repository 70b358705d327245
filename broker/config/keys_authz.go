package config

import (
	"fmt"

	"github.com/fjordlog/fjord/broker/acl"
)

// StandardAuthorizerClass is Kafka's KRaft authorizer, the class name that
// turns Fjord's ACLs on; LegacyAuthorizerClass is the ZooKeeper-era one,
// accepted as an alias (the broker warns at start-up).
const (
	StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	LegacyAuthorizerClass   = "kafka.security.authorizer.AclAuthorizer"
)

func setAuthorizerClass(c *Config, v string) error {
	switch v {
	case "", StandardAuthorizerClass, LegacyAuthorizerClass:
		c.AuthorizerClass = v
		return nil
	}
	return fmt.Errorf("authorizer %q is not available: Fjord's authorizer is Kafka's %s (ACLs in the metadata log); without the authorizer asked for, every client could do everything, so Fjord will not start", v, StandardAuthorizerClass)
}

func setSuperUsers(c *Config, v string) error {
	for _, p := range acl.ParseSuperUsers(v) {
		if err := acl.ValidPrincipal(p); err != nil {
			return err
		}
	}
	c.SuperUsers = v
	return nil
}
