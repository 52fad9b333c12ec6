package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// TestStoreInvalidArgumentIs400: the errors a real store (of the backend
// HERALD_TEST_BACKEND names) returns for arguments that can never be valid,
// a nil params on every method and a bus event whose data is not UTF-8,
// are answered 400 invalid_argument in Herald's words (no backend name),
// never a 500.
func TestStoreInvalidArgumentIs400(t *testing.T) {
	ctx := t.Context()
	loc := filepath.Join(t.TempDir(), "herald.db")
	if testdb.Backend() == "postgres" {
		var err error
		if loc, err = storeurl.PostgresLocation(testdb.PostgresURL(t), testdb.NewSchema(t)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := storeurl.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	errs := map[string]error{}
	_, errs["BusPublish with data of invalid UTF-8"] = st.BusPublish(ctx, &storage.BusPublishParams{Tenant: "acme",
		Event: storage.BusPublishEvent{ID: "e", Type: "a", Data: json.RawMessage("\"\xff\"")}})
	typ, v := reflect.TypeFor[storage.Store](), reflect.ValueOf(st)
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		ft := m.Type
		if ft.NumIn() != 2 || ft.In(1).Kind() != reflect.Pointer {
			continue // no params (storagetest's NilParams lists them)
		}
		out := v.MethodByName(m.Name).Call([]reflect.Value{reflect.ValueOf(context.Context(ctx)), reflect.Zero(ft.In(1))})
		errs[m.Name+"(nil)"], _ = out[len(out)-1].Interface().(error)
	}
	a := &API{logger: slog.New(slog.DiscardHandler)}
	for what, err := range errs {
		if err == nil {
			t.Errorf("%s: no error", what)
			continue
		}
		rec := httptest.NewRecorder()
		a.writeError(rec, httptest.NewRequest("GET", "/v1/x", nil), err)
		var p wire.Problem
		if e := json.Unmarshal(rec.Body.Bytes(), &p); e != nil {
			t.Fatalf("%s: %v", what, e)
		}
		if rec.Code != http.StatusBadRequest || p.Code != "invalid_argument" {
			t.Errorf("%s: error %q answered %d %s, want 400 invalid_argument", what, err, rec.Code, p.Code)
		}
		if strings.Contains(p.Detail, "sqlite:") || strings.Contains(p.Detail, "postgres:") || p.Detail == "" {
			t.Errorf("%s: detail %q, want Herald's words", what, p.Detail)
		}
	}
}
