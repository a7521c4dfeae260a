package herenow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The tests run against a real herenow server: TestMain starts one
// (`herenow serve --listen 127.0.0.1:0`, the memory store) from
// $HERENOW_BIN, or target/debug/herenow of the repository, and stops it
// at the end. Tests that need other flags start their own.

var main_ *server

func TestMain(m *testing.M) {
	s, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "herenow tests: cannot start the server:", err)
		os.Exit(1)
	}
	main_ = s
	code := m.Run()
	s.stop()
	if aux != nil {
		aux.stop()
	}
	os.Exit(code)
}

// server is one `herenow serve` process.
type server struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the tail small: a log, not a sink
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// binary finds the server: $HERENOW_BIN, else the repository's debug
// build.
func binary() (string, error) {
	if b := os.Getenv("HERENOW_BIN"); b != "" {
		return b, nil
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("HERENOW_BIN is not set and git cannot find the repository: %w", err)
	}
	b := filepath.Join(strings.TrimSpace(string(out)), "target", "debug", "herenow")
	if _, err := os.Stat(b); err != nil {
		return "", fmt.Errorf("HERENOW_BIN is not set and %s does not exist (cargo build -p herenow): %w", b, err)
	}
	return b, nil
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// startServer runs `herenow serve --listen 127.0.0.1:0 ARGS…`, reads the
// address from its "listening" line and waits for /readyz.
func startServer(args ...string) (*server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn")
	dieWithParent(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case s.url = <-found:
	case <-s.done:
		return nil, fmt.Errorf("the server exited at start: %s", s.stderr.String())
	case <-time.After(20 * time.Second):
		s.stop()
		return nil, fmt.Errorf("no listening line within 20 s: %s", s.stderr.String())
	}
	// Bounded readiness poll: the process is up, its store may not be.
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("/readyz not 200 within 20 s (last error %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// aux is a second server, started once, with API keys and a single event
// stream allowed: for the auth and Retry-After tests.
var (
	auxOnce sync.Once
	aux     *server
	auxErr  error
)

const (
	writeKey = "go-write-key-0123456789"
	readKey  = "go-read-key-0123456789"
)

func auxServer(t *testing.T) *server {
	t.Helper()
	auxOnce.Do(func() {
		aux, auxErr = startServer("--api-key", writeKey+":write", "--api-key", readKey+":read", "--max-event-streams", "1")
	})
	if auxErr != nil {
		t.Fatalf("aux server: %v", auxErr)
	}
	return aux
}

// client is a client of the main server.
func client(t *testing.T) *Client {
	t.Helper()
	return clientOf(t, main_.url, Options{})
}

func clientOf(t *testing.T, url string, opts Options) *Client {
	t.Helper()
	opts.BaseURL = url
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

var spaceSeq atomic.Int64

var notSpaceChar = regexp.MustCompile(`[^A-Za-z0-9._:@-]`)

// space is a space of this test alone.
func space(t *testing.T) string {
	name := notSpaceChar.ReplaceAllString(t.Name(), "-")
	if len(name) > 80 {
		name = name[:80]
	}
	return fmt.Sprintf("go.%s.%d.%d", name, os.Getpid(), spaceSeq.Add(1))
}

// uid is an id unique to this run, so the global (per user) state of
// tests never meets.
func uid(t *testing.T, name string) string {
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), spaceSeq.Add(1))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// mustProblem asserts err is an *Error with this status and code.
func mustProblem(t *testing.T, err error, status int, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error %d %s, got %T %v", status, code, err, err)
	}
	if e.Status != status || e.Code != code {
		t.Fatalf("want %d %s, got %d %q (%v)", status, code, e.Status, e.Code, e)
	}
	if !HasCode(err, code) {
		t.Fatalf("HasCode(%q) is false for %v", code, err)
	}
	return e
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// cutProxy forwards TCP to a server and can cut every connection, and
// refuse new ones, to drop event streams on purpose.
type cutProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	refusing bool
}

func newCutProxy(t *testing.T, targetURL string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(targetURL, "http://"), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.cut(true)
	})
	return p
}

func (p *cutProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refusing := p.refusing
		if !refusing {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if refusing {
			c.Close()
			continue
		}
		p.accepted.Add(1)
		go p.pipe(c)
	}
}

func (p *cutProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut closes every connection; with refuse, new ones are closed at once
// until allow.
func (p *cutProxy) cut(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = refuse
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

func (p *cutProxy) allow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = false
}
