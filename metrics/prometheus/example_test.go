package prometheus_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/heraldwf/herald"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/heraldwf/herald/storage/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A runtime reports to a Prometheus Observer, and /metrics serves the
// registry with promhttp. Here the server is an httptest one and the
// example scrapes it once; in production, http.ListenAndServe.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "herald-metrics-example")
	defer os.RemoveAll(dir)

	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(100)) // at most 100 tenant series, then "other"
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	store, err := sqlite.Open(ctx, filepath.Join(dir, "herald.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := herald.NewRuntime(store, &herald.Config{ClientConfig: herald.ClientConfig{Observer: obs}})
	if err != nil {
		log.Fatal(err)
	}
	herald.RegisterWorkflow(rt, "greet", func(ctx *herald.Context, _ struct{}) (string, error) {
		var name string
		err := ctx.WaitEvent("name").Get(&name)
		return "hello " + name, err
	})
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)
	c, _ := rt.Client("acme")
	id, _ := c.StartWorkflow(ctx, "greet", nil)
	_, _ = c.RaiseEvent(ctx, id, "name", "world")
	if _, err := c.WaitForCompletion(ctx, id); err != nil {
		log.Fatal(err)
	}
	// The turn reports to the Observer after its commit, which
	// WaitForCompletion may see first: Stop waits for the turns in flight,
	// their reports included.
	if err := rt.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "herald_events_") {
			fmt.Println(line)
		}
	}
	// Output:
	// herald_events_accepted_total{lane="positional",tenant="acme"} 1
	// herald_events_delivered_total{lane="positional",tenant="acme"} 1
}
