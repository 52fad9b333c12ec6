package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/signing"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/internal/apitest"
	"github.com/heraldwf/herald/internal/testdb"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/heraldwf/herald/webui"
)

func TestMain(m *testing.M) {
	herald.ServeScriptChild() // bus scripts run in child processes of the test binary
	testdb.Main(m)
}

// server is the API and the UI mounted as herald serve mounts them
// (webui.Mount), over a runtime on a fresh real store.
type server struct {
	t   testing.TB
	api *apitest.Server
	reg *prometheus.Registry
	ui  *webui.UI
	URL string
}

func newServer(t testing.TB) *server {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith is newServer with the UI's options changed by configure
// (a clock, session caps) before the UI is made.
func newServerWith(t testing.TB, configure func(*webui.Options)) *server {
	t.Helper()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(100))
	if err != nil {
		t.Fatal(err)
	}
	a := apitest.New(t, apitest.Options{
		Configure: func(c *herald.Config, _ *httpapi.Options) { c.Observer = obs },
		Register: func(rt *herald.Runtime) {
			approval.Register(rt)
			signing.Register(rt)
		},
	})
	opts := webui.Options{Runtime: a.Runtime, Keys: a.Store, Metrics: reg}
	if configure != nil {
		configure(&opts)
	}
	ui, err := webui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	webui.Mount(mux, a.API, ui)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &server{t: t, api: a, reg: reg, ui: ui, URL: srv.URL}
}

func (s *server) ctx() context.Context { return s.api.Ctx }

// key creates a tenant key and returns its secret.
func (s *server) key(tenant string) (id, secret string) {
	s.t.Helper()
	k, secret, err := httpapi.CreateKey(s.ctx(), s.api.Store, tenant, false, "webui test", time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return k.ID, secret
}

func (s *server) client(tenant string) *herald.Client {
	s.t.Helper()
	c, err := s.api.Runtime.Client(tenant)
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}

// eventually waits for cond, failing the test after 30 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	apitest.Eventually(t, ctx, what, func() (bool, error) { return cond(), nil })
}

// browserless is a plain HTTP client with a cookie jar, signed in.
type browserless struct {
	t    testing.TB
	s    *server
	http *http.Client
	csrf string
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (s *server) signIn(key string) *browserless {
	s.t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browserless{t: s.t, s: s, http: &http.Client{Jar: jar}}
	body := b.get("/signin", http.StatusOK)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		s.t.Fatalf("no CSRF token on the sign-in page:\n%s", body)
	}
	resp := b.post("/signin", url.Values{"csrf": {m[1]}, "key": {key}, "next": {"/instances"}})
	if resp.code != http.StatusOK || !strings.Contains(resp.body, `id="instances"`) {
		s.t.Fatalf("sign-in: %d\n%s", resp.code, resp.body)
	}
	b.csrf = csrfRe.FindStringSubmatch(resp.body)[1]
	return b
}

type answer struct {
	code int
	body string
}

func (b *browserless) do(req *http.Request) answer {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(body)}
}

func (b *browserless) get(path string, want int) string {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.s.URL+path, nil)
	a := b.do(req)
	if want != 0 && a.code != want {
		b.t.Fatalf("GET %s: %d, want %d\n%s", path, a.code, want, a.body)
	}
	return a.body
}

func (b *browserless) post(path string, form url.Values) answer {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.s.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}
