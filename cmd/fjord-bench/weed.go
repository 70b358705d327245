package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The tier mode's object store is SeaweedFS's `weed mini` (master,
// volume server, filer and S3 gateway in one process), started the way
// the tiered-storage tests start it (storage/remote/s3/weedtest): every
// port free on 127.0.0.1, the optional servers off, one S3 identity. The
// bench is a module of its own and does not import the broker module's
// test helpers, so this is the same recipe written for a process the
// bench owns rather than for a testing.T.

// weedProc is one weed mini the bench started. Endpoint and the keys are
// fixed once it serves; the process is killed, with its whole process
// group, by stop.
type weedProc struct {
	Endpoint             string // http://127.0.0.1:PORT, the S3 gateway
	AccessKey, SecretKey string
	Region               string
	dir                  string // temp dir: data/ and weed.log
	log                  string
	cmd                  *exec.Cmd
	done                 chan struct{} // closed once cmd has been waited for
}

// startWeed runs bin as weed mini in a fresh temp dir and waits (at most
// 3 minutes: a loaded two-core machine takes tens of seconds) until its
// S3 gateway answers a signed request.
func startWeed(ctx context.Context, bin string) (*weedProc, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("weed binary (make weed builds bin/weed): %w", err)
	}
	// FJORD_BENCH_WEED_DIR puts weed's directory elsewhere (a tmpfs: the
	// store's writes then stay off the disk the node fsyncs to, as a remote
	// store's do); unset, the system's temp dir, as the node's.
	dir, err := os.MkdirTemp(os.Getenv("FJORD_BENCH_WEED_DIR"), "fjord-bench-weed-")
	if err != nil {
		return nil, err
	}
	p, err := freePorts(10)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	w := &weedProc{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(p[6]),
		AccessKey: "fjordbenchkey",
		SecretKey: "fjordbenchsecret0123456789",
		Region:    "us-east-1",
		dir:       dir,
		log:       filepath.Join(dir, "weed.log"),
		done:      make(chan struct{}),
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(w.log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	w.cmd = exec.Command(bin, "mini",
		"-dir="+filepath.Join(dir, "data"),
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-master.port="+strconv.Itoa(p[0]), "-master.port.grpc="+strconv.Itoa(p[1]),
		"-volume.port="+strconv.Itoa(p[2]), "-volume.port.grpc="+strconv.Itoa(p[3]),
		"-filer.port="+strconv.Itoa(p[4]), "-filer.port.grpc="+strconv.Itoa(p[5]),
		"-s3.port="+strconv.Itoa(p[6]), "-s3.port.grpc="+strconv.Itoa(p[7]),
		"-admin.port="+strconv.Itoa(p[8]), "-admin.port.grpc="+strconv.Itoa(p[9]), "-admin.port.legacy=0",
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-webdav=false", "-admin.ui=false",
		"-master.telemetry=false",
		"-s3.autoCreateBucket=false",
		"-master.volumeSizeLimitMB=64",
	)
	w.cmd.Dir = dir
	w.cmd.Stdout, w.cmd.Stderr = logFile, logFile
	// weed mini makes its one admin identity of these.
	w.cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+w.AccessKey, "AWS_SECRET_ACCESS_KEY="+w.SecretKey, "HOME="+dir)
	// Its own process group, so stop takes whatever it forks; the kernel
	// kills it if the bench dies first.
	w.cmd.SysProcAttr = groupSysProcAttr()
	logf("[weed] starting %s", strings.Join(w.cmd.Args, " "))
	if err := w.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start weed: %w", err)
	}
	childrenMu.Lock()
	weedChildren[w] = true
	childrenMu.Unlock()
	go func() { w.cmd.Wait(); close(w.done) }()
	if err := w.waitReady(ctx, 3*time.Minute); err != nil {
		tail := w.tail()
		w.stop()
		return nil, fmt.Errorf("weed mini: %w; its log: %s", err, tail)
	}
	return w, nil
}

// pid is weed's process id, for its CPU time.
func (w *weedProc) pid() int { return w.cmd.Process.Pid }

// sign signs req for the gateway with the server's one identity. S3
// wants the payload's SHA-256 in a header of its own as well.
func (w *weedProc) sign(ctx context.Context, req *http.Request, body []byte) error {
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: w.AccessKey, SecretAccessKey: w.SecretKey}
	return v4.NewSigner().SignHTTP(ctx, creds, req, hash, "s3", w.Region, time.Now())
}

// do sends one signed request without a body and returns its status.
func (w *weedProc) do(ctx context.Context, method, path string) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, w.Endpoint+path, nil)
	if err != nil {
		return 0, err
	}
	if err := w.sign(rctx, req, nil); err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitReady lists the buckets (a signed GET / that the gateway answers
// only once it reaches the filer), with a doubling backoff up to a
// second, until it succeeds, weed exits or bound passes.
func (w *weedProc) waitReady(ctx context.Context, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	backoff := 50 * time.Millisecond
	last := "no answer"
	for {
		code, err := w.do(ctx, http.MethodGet, "/")
		if err == nil && code == http.StatusOK {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("ListBuckets: HTTP %d", code)
		}
		select {
		case <-w.done:
			return fmt.Errorf("exited before serving S3 (%v)", w.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("S3 not serving after %v: %s", bound, last)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// createBucket creates bucket, retrying with a backoff for at most two
// minutes: a fresh weed mini may refuse writes until its volume server
// has registered with the master.
func (w *weedProc) createBucket(ctx context.Context, bucket string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		code, err := w.do(ctx, http.MethodPut, "/"+bucket)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("create bucket %s: HTTP %d, %v; weed's log: %s", bucket, code, err, w.tail())
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

// dataBytes is what weed holds on disk (du of its data dir): the
// objects, their replicas' bookkeeping and its own metadata.
func (w *weedProc) dataBytes() int64 { return duBytes(filepath.Join(w.dir, "data")) }

// stop kills weed's process group (SIGTERM, SIGKILL after 10 s) and
// removes its directory unless FJORD_BENCH_KEEP is set.
func (w *weedProc) stop() {
	pgid := w.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-w.done
	}
	syscall.Kill(-pgid, syscall.SIGKILL) // whatever it left in its group
	childrenMu.Lock()
	delete(weedChildren, w)
	childrenMu.Unlock()
	removeUnlessKept(w.dir)
}

// tail is the end of weed's log, on one line, for an error.
func (w *weedProc) tail() string {
	b, err := os.ReadFile(w.log)
	if err != nil || len(b) == 0 {
		return "(empty)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-10):], " | ")
}
