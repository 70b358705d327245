package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// authcheckResult says how a SASL listener treated three clients: the
// given credentials (must be served), the same user with a wrong password
// (must get SASL_AUTHENTICATION_FAILED) and no SASL at all (must not be
// served).
type authcheckResult struct {
	OK            bool   `json:"ok"`
	Error         string `json:"error,omitempty"`
	Bootstrap     string `json:"bootstrap"`
	User          string `json:"user"`
	WrongPassword string `json:"wrong_password_error"`
	NoSASL        string `json:"no_sasl_error"`
}

func authcheck(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("authcheck", flag.ContinueOnError)
	bootstrap := fs.String("bootstrap", "", "host:port")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the served client's metadata")
	security := securityFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	mech, user, pass := fs.Lookup("sasl-mechanism").Value.String(), fs.Lookup("sasl-user").Value.String(), fs.Lookup("sasl-password").Value.String()
	if err := security(); err != nil || *bootstrap == "" || user == "" {
		fmt.Fprintf(os.Stderr, "authcheck: --bootstrap and --sasl-user are required (%v)\n", err)
		return 2
	}
	res := &authcheckResult{Bootstrap: *bootstrap, User: user}
	err := runAuthcheck(res, splitSeeds(*bootstrap), mech, user, pass, *timeout)
	return report(stdout, "authcheck", err, &res.OK, &res.Error, res)
}

// metadataWith asks for brokers once, with opts as the only security
// options, and no retries.
func metadataWith(ctx context.Context, seeds []string, opts ...kgo.Opt) error {
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(3 * time.Second), kgo.RequestRetries(0)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return err
	}
	defer func() { go cl.Close() }()
	return bounded(ctx, 10*time.Second, "metadata", func(c context.Context) error {
		_, err := kadm.NewClient(cl).BrokerMetadata(c)
		return err
	})
}

func runAuthcheck(res *authcheckResult, seeds []string, mech, user, pass string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// The given credentials first, retried: an error later must not be
	// the listener being unreachable.
	for {
		err := metadataWith(ctx, seeds, slices.Concat(tlsOpts, saslOpts)...)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("as %s with the given password: %w", user, err)
		}
		logf("as %s: %v (retrying)", user, err)
		time.Sleep(500 * time.Millisecond)
	}
	wrong, err := saslMechanism(mech, user, pass+"-wrong")
	if err != nil {
		return err
	}
	err = metadataWith(ctx, seeds, slices.Concat(tlsOpts, []kgo.Opt{kgo.SASL(wrong)})...)
	switch {
	case err == nil:
		return fmt.Errorf("as %s with a wrong password: served", user)
	case !errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("as %s with a wrong password: %w, want SASL_AUTHENTICATION_FAILED", user, err)
	}
	res.WrongPassword = err.Error()
	if err = metadataWith(ctx, seeds, tlsOpts...); err == nil {
		return errors.New("without SASL: served")
	}
	res.NoSASL = err.Error()
	return nil
}
