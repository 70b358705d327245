package remotestore_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/fjordlog/fjord/broker/config"
	"github.com/fjordlog/fjord/broker/remotestore"
	"github.com/fjordlog/fjord/storage/remote/s3/weedtest"
)

func tiered(endpoint, bucket, id, secret string) config.Config {
	c := config.Default()
	c.Remote.Enable = true
	c.Remote.ManagerClass = config.AivenRSMClass
	c.Remote.S3 = config.RemoteS3{Backend: config.AivenS3BackendClass, Endpoint: endpoint, Bucket: bucket, PathStyle: true, AccessKeyID: id, SecretAccessKey: secret, Region: "us-east-1"}
	return c
}

func TestOpenDisabled(t *testing.T) {
	c := config.Default()
	st, err := remotestore.Open(context.Background(), &c)
	if st != nil || err != nil {
		t.Fatalf("Open with tiered storage off = %v, %v; want nil, nil", st, err)
	}
	if err := remotestore.Check(context.Background(), &c, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
}

// TestCheck: the start-up check against SeaweedFS refuses a missing
// bucket and wrong credentials with messages naming the keys, passes a
// good bucket, and lets a node start (with a warning) when the store
// cannot be reached.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	w := weedtest.Start(t)
	w.CreateBucket(t, "segments")

	good := tiered(w.Endpoint, "segments", w.AccessKey, w.SecretKey)
	if err := remotestore.Check(ctx, &good, zerolog.Nop()); err != nil {
		t.Errorf("good bucket: %v", err)
	}
	st, err := remotestore.Open(ctx, &good)
	if err != nil || st == nil {
		t.Fatalf("Open = %v, %v", st, err)
	}
	if err := st.Put(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Errorf("put through the opened store: %v", err)
	}

	missing := tiered(w.Endpoint, "no-such-bucket", w.AccessKey, w.SecretKey)
	if err := remotestore.Check(ctx, &missing, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) || !strings.Contains(err.Error(), "rsm.config.storage.s3.bucket.name") {
		t.Errorf("missing bucket: %v", err)
	}
	wrong := tiered(w.Endpoint, "segments", w.AccessKey, "wrong-secret")
	if err := remotestore.Check(ctx, &wrong, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("wrong secret: %v", err)
	} else if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("the error shows the secret: %v", err)
	}

	// A closed port: the node starts, and says why once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	down := tiered(closed, "segments", w.AccessKey, w.SecretKey)
	var logs bytes.Buffer
	if err := remotestore.Check(ctx, &down, zerolog.New(&logs)); err != nil {
		t.Errorf("unreachable store: %v, want a warning and nil", err)
	}
	if !strings.Contains(logs.String(), "cannot be reached") || strings.Contains(logs.String(), w.SecretKey) {
		t.Errorf("unreachable store logged %q", logs.String())
	}
}

// TestCheckWithoutSeaweedFS: the start-up check's refusals without a
// SeaweedFS binary (TestCheck skips then): an S3 endpoint that answers
// HeadBucket 404 for a missing bucket and 403 for refused credentials, as
// S3 does (a HEAD answer has no body), makes Check fail naming the keys
// to fix; 200 passes.
func TestCheckWithoutSeaweedFS(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch strings.Trim(r.URL.Path, "/") {
		case "segments":
			w.WriteHeader(http.StatusOK)
		case "revoked":
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	good := tiered(srv.URL, "segments", "id", "secret")
	if err := remotestore.Check(ctx, &good, zerolog.Nop()); err != nil {
		t.Errorf("a bucket that exists: %v", err)
	}
	missing := tiered(srv.URL, "no-such-bucket", "id", "secret")
	if err := remotestore.Check(ctx, &missing, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) ||
		!strings.Contains(err.Error(), "rsm.config.storage.s3.bucket.name") || !strings.Contains(err.Error(), "create it") {
		t.Errorf("missing bucket: %v", err)
	}
	revoked := tiered(srv.URL, "revoked", "id", "secret")
	if err := remotestore.Check(ctx, &revoked, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("refused credentials: %v", err)
	}
}
