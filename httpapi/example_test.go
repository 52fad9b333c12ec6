package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/storage/sqlite"
)

// Serving your own workflows over the HTTP API from your own binary: the
// API is an http.Handler over a runtime.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "herald-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "herald.db"))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	rt, err := herald.NewRuntime(store, nil)
	if err != nil {
		panic(err)
	}
	herald.RegisterWorkflow(rt, "greet", func(ctx *herald.Context, name string) (string, error) {
		return "hello " + name, nil
	})
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer rt.Stop(ctx)

	// The first admin key: HERALD_ADMIN_KEY if set, else generated (print it once).
	secret, err := httpapi.EnsureAdminKey(ctx, store, os.Getenv("HERALD_ADMIN_KEY"), time.Now())
	if err != nil {
		panic(err)
	}
	api, err := httpapi.New(httpapi.Options{Runtime: rt, Keys: store,
		Ready: func(ctx context.Context) error { _, err := store.KeyCount(ctx); return err }})
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Addr: "127.0.0.1:0", Handler: api, ReadHeaderTimeout: 10 * time.Second}
	_ = srv // srv.ListenAndServe() in a real program
	fmt.Println(secret != "")
	// Output: true
}
