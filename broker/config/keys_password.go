package config

import (
	"strconv"

	"github.com/fjordlog/fjord/broker/pwenc"
)

// passwordEncoderKeys are the table rows of the password.encoder.* keys
// (Config.PasswordEncoder): how the password-type dynamic broker configs
// are encrypted before they are stored in the metadata log
// (passwords.go, broker/pwenc). Read-only, as in Kafka.
func passwordEncoderKeys() []Key {
	d := pwenc.DefaultSettings()
	pe := func(c *Config) *pwenc.Settings { return &c.PasswordEncoder }
	return []Key{
		{Name: "password.encoder.secret", Doc: "Secret that the password-type dynamic broker configs (ssl.keystore.password, ssl.key.password, ssl.truststore.password, the inline PEM ssl.keystore.key, ssl.keystore.certificate.chain and ssl.truststore.certificates, and their listener.name.<l>. forms) are encrypted with before they are stored in the metadata log, so the controllers, the log, its snapshots and the nodes that follow it hold only ciphertext. Unset: such a change is refused with INVALID_REQUEST. Give every node the same secret: the broker that receives a change encrypts it, the broker that uses it decrypts it. Never shown by DescribeConfigs. See docs/security.md (Secrets at rest).",
			Set: setString(func(c *Config) *string { return &pe(c).Secret })},
		{Name: "password.encoder.old.secret", Doc: "The previous password.encoder.secret, while rotating it: values stored under it are still decrypted; a value is stored under the new secret when it is set again.",
			Set: setString(func(c *Config) *string { return &pe(c).OldSecret })},
		{Name: "password.encoder.keyfactory.algorithm", Def: d.KeyFactory, Doc: "Key derivation for the stored passwords: " + pwenc.KeyFactorySHA512 + ", " + pwenc.KeyFactorySHA256 + " or " + pwenc.KeyFactorySHA1 + " (Kafka's default is the first when the JVM has it). Each stored value records its own, so a change affects new values only.",
			Set: setString(func(c *Config) *string { return &pe(c).KeyFactory })},
		{Name: "password.encoder.cipher.algorithm", Def: d.Cipher, Doc: "Fjord encrypts stored passwords with " + pwenc.CipherGCM + ", which also detects a value altered on disk; " + pwenc.CipherCBC + " (Kafka's default, which does not) is accepted and means the same here; anything else stops start-up.",
			Set: setString(func(c *Config) *string { return &pe(c).Cipher })},
		{Name: "password.encoder.key.length", Def: strconv.Itoa(int(d.KeyLength)), Doc: "Bits of the AES key derived for each stored password: 128, 192 or 256.",
			Set: setInt(func(c *Config) *int32 { return &pe(c).KeyLength })},
		{Name: "password.encoder.iterations", Def: strconv.Itoa(int(d.Iterations)), Doc: "PBKDF2 iterations deriving each stored password's key, " + strconv.Itoa(pwenc.MinIterations) + " to " + strconv.Itoa(pwenc.MaxIterations) + ".",
			Set: setInt(func(c *Config) *int32 { return &pe(c).Iterations })},
	}
}
