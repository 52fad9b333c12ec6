package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/cmd/herald/internal/otelsetup"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/internal/storeurl"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/webui"
)

const serveLong = `Runs Herald: the engine with the example workflows registered (approval,
meter, mailbox, onboard, and the bus handler notify-sales), the event bus,
the HTTP API under /v1 (its OpenAPI document at /v1/openapi.json), and
the web admin UI at / (sign in with an API key).
/healthz answers while the process runs, /readyz while the store answers,
/metrics serves Prometheus metrics (engine and bus); none of these needs
a key.

The store is a SQLite file (--db, default herald.db in the working
directory) or PostgreSQL (--postgres URL). Any number of herald serve on
one PostgreSQL database share the work.

On the first start, when the store has no API key, the admin key is
HERALD_ADMIN_KEY if set (at least 32 characters), otherwise one is
generated and printed once on stderr. Later starts leave the keys alone:
manage them with herald keys.

SIGINT or SIGTERM stops the server: it stops accepting connections, and
waits for requests in flight and the engine's in-flight work to finish,
at most --shutdown-timeout.`

// HTTP server timeouts of herald serve.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = time.Minute
	serveWriteTimeout      = 2 * time.Minute
	serveIdleTimeout       = 2 * time.Minute
	defaultMetricsTenants  = 100
)

// serveFlags are the flags of herald serve.
type serveFlags struct {
	addr, db, postgres, logFormat, metricsAddr string
	shutdownTimeout                            time.Duration
}

func (a *app) serveCommand() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "run the server: engine, event bus and HTTP API",
		Long:  serveLong,
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.serve(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "", "the address to listen on (env HERALD_ADDR; default 127.0.0.1:8080)")
	fl.StringVar(&f.db, "db", "", "the store: a SQLite file (path or sqlite:PATH) or a postgres:// URL (env HERALD_DB; default herald.db)")
	fl.StringVar(&f.postgres, "postgres", "", "run on PostgreSQL at this postgres:// URL (env HERALD_DATABASE_URL); schema=NAME picks the schema (default herald)")
	fl.StringVar(&f.logFormat, "log-format", "", "text or json (env HERALD_LOG_FORMAT; default text)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", "", "serve /metrics on this address instead of --addr (env HERALD_METRICS_ADDR)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a stop waits for requests and work in flight")
	return cmd
}

// serveLocation returns the store the flags (then the environment) name.
func (a *app) serveLocation(cmd *cobra.Command, f *serveFlags) (*storeurl.Location, error) {
	dbSet, pgSet := cmd.Flags().Changed("db"), cmd.Flags().Changed("postgres")
	db, pg := f.db, f.postgres
	switch {
	case dbSet && pgSet:
		return nil, usageErrorf(cmd, "--db and --postgres both name a store; give one")
	case dbSet:
		pg = ""
	case pgSet:
		db = ""
	default:
		db, pg = a.getenv("HERALD_DB"), a.getenv("HERALD_DATABASE_URL")
		if db != "" && pg != "" {
			return nil, usageErrorf(cmd, "HERALD_DB and HERALD_DATABASE_URL both name a store; unset one, or give --db or --postgres")
		}
		if db == "" && pg == "" {
			db = "herald.db"
		}
	}
	if pg != "" {
		loc, err := storeurl.Parse(pg)
		if err != nil {
			return nil, usageErrorf(cmd, "--postgres: %v", err)
		}
		if loc.Backend != storeurl.Postgres {
			return nil, usageErrorf(cmd, "--postgres wants a postgres:// URL, got %s (a SQLite file goes in --db)", loc)
		}
		return loc, nil
	}
	loc, err := storeurl.Parse(db)
	if err != nil {
		return nil, usageErrorf(cmd, "--db: %v", err)
	}
	if loc.Backend == storeurl.SQLite {
		if abs, err := filepath.Abs(loc.Path); err == nil {
			loc.Path = abs
		}
	}
	return loc, nil
}

// serve runs herald serve until cmd's context ends (SIGINT, SIGTERM).
func (a *app) serve(cmd *cobra.Command, f *serveFlags) error {
	ctx := cmd.Context()
	loc, err := a.serveLocation(cmd, f)
	if err != nil {
		return err
	}
	addr := a.flagOrEnv(cmd, "addr", "HERALD_ADDR", "127.0.0.1:8080")
	metricsAddr := a.flagOrEnv(cmd, "metrics-addr", "HERALD_METRICS_ADDR", "")
	var handler slog.Handler
	switch format := a.flagOrEnv(cmd, "log-format", "HERALD_LOG_FORMAT", "text"); format {
	case "text":
		handler = slog.NewTextHandler(a.stderr, nil)
	case "json":
		handler = slog.NewJSONHandler(a.stderr, nil)
	default:
		return usageErrorf(cmd, "--log-format %q: want text or json", format)
	}
	if f.shutdownTimeout <= 0 {
		return usageErrorf(cmd, "--shutdown-timeout must be positive")
	}
	logger := slog.New(handler)

	// Tracing: exported with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT (or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; a no-op otherwise.
	shutdownTracing, err := otelsetup.Setup(ctx, "herald")
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		shutdownTracing(sctx)
	}()

	// The store.
	exists, err := loc.Exists(ctx)
	if err != nil {
		return err
	}
	store, err := loc.Open(ctx)
	if err != nil {
		return fmt.Errorf("open %s: %w", loc.Describe(), err)
	}
	defer store.Close()
	state := "existing"
	if !exists {
		state = "new"
	}
	logger.Info("herald serve: store "+loc.Describe()+" ("+state+")", "version", versionLine(readBuildInfo))
	var keys storage.KeyStore = store
	if err := a.ensureAdminKey(ctx, keys, logger); err != nil {
		return err
	}

	// Metrics, the runtime, the API.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(defaultMetricsTenants))
	if err != nil {
		return err
	}
	rt, err := herald.NewRuntime(store, &herald.Config{ClientConfig: herald.ClientConfig{Logger: logger, Observer: obs}})
	if err != nil {
		return err
	}
	registerExamples(rt)
	api, err := httpapi.New(httpapi.Options{
		Runtime: rt, Keys: keys, Logger: logger,
		Ready: func(ctx context.Context) error {
			_, err := keys.KeyCount(ctx)
			return err
		},
	})
	if err != nil {
		return err
	}
	ui, err := webui.New(webui.Options{Runtime: rt, Keys: keys, Metrics: reg, Logger: logger})
	if err != nil {
		return err
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(handler, slog.LevelError)})
	mux := http.NewServeMux()
	webui.Mount(mux, api, ui) // the API at /v1/, /healthz, /readyz; the web UI at /
	servers := []*http.Server{newHTTPServer(mux, logger)}
	listenOn := []string{addr}
	if metricsAddr == "" {
		mux.Handle("GET /metrics", metrics)
	} else {
		mm := http.NewServeMux()
		mm.Handle("GET /metrics", metrics)
		servers = append(servers, newHTTPServer(mm, logger))
		listenOn = append(listenOn, metricsAddr)
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, addr := range listenOn {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		lns = append(lns, ln)
	}

	// Run until the context ends or a server fails.
	if err := rt.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(lns[i]) }()
	}
	logger.Info("herald serve: listening on http://"+lns[0].Addr().String(), "metrics", "http://"+lns[len(lns)-1].Addr().String()+"/metrics")
	var serveErr error
	select {
	case <-ctx.Done():
		logger.Info("herald serve: stopping; waiting for requests and work in flight", "timeout", f.shutdownTimeout)
	case serveErr = <-errc:
		logger.Error("herald serve: the HTTP server failed; stopping", "err", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		if err := srv.Shutdown(sctx); err != nil {
			srv.Close()
			errs = append(errs, fmt.Errorf("requests in flight: %w", err))
		}
	}
	if err := rt.Stop(sctx); err != nil {
		errs = append(errs, fmt.Errorf("engine work in flight: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("serve: stopped without finishing within %s: %w", f.shutdownTimeout, err)
	}
	if serveErr != nil {
		return serveErr
	}
	logger.Info("herald serve: stopped")
	return nil
}

// newHTTPServer returns an http.Server for h with herald serve's timeouts.
func newHTTPServer(h http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		WriteTimeout:      serveWriteTimeout,
		IdleTimeout:       serveIdleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// ensureAdminKey creates the first admin key when the store has none:
// HERALD_ADMIN_KEY, else a generated one printed once on stderr.
func (a *app) ensureAdminKey(ctx context.Context, keys storage.KeyStore, logger *slog.Logger) error {
	fromEnv := a.getenv("HERALD_ADMIN_KEY")
	n, err := keys.KeyCount(ctx)
	if err != nil {
		return fmt.Errorf("count API keys: %w", err)
	}
	if n > 0 {
		if fromEnv != "" {
			logger.Warn("herald serve: HERALD_ADMIN_KEY is ignored: the store has API keys already (manage them with herald keys)")
		}
		return nil
	}
	secret, err := httpapi.EnsureAdminKey(ctx, keys, fromEnv, time.Now())
	if err != nil {
		return fmt.Errorf("HERALD_ADMIN_KEY: %w", err)
	}
	if secret == "" {
		if fromEnv != "" {
			logger.Info("herald serve: the admin key is HERALD_ADMIN_KEY's (stored as its hash)")
		}
		return nil
	}
	printAdminKey(a.stderr, secret)
	return nil
}

// printAdminKey shows a generated admin key, once.
func printAdminKey(w io.Writer, secret string) {
	fmt.Fprintf(w, "\nherald serve: the store had no API key, so this admin key was created.\n"+
		"It is shown this once and only its hash is kept: store it now.\n\n"+
		"    HERALD_API_KEY=%s\n\n", secret)
}
