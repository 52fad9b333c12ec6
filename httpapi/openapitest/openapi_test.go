package openapitest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/storage/sqlite"
)

// served starts the API as `herald serve` does (a runtime on a SQLite
// file, the API over it) and returns the document it serves at
// GET /v1/openapi.json.
func served(t *testing.T) []byte {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rt, err := herald.NewRuntime(store, nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Options{Runtime: rt, Keys: store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %s: %s", resp.Status, b)
	}
	return b
}

// TestOpenAPI_KinOpenAPI: kin-openapi loads the served document, resolves
// every $ref, and validates it.
func TestOpenAPI_KinOpenAPI(t *testing.T) {
	b := served(t)
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("kin-openapi does not load the document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("kin-openapi: the document is invalid: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Paths.Map()) == 0 {
		t.Fatalf("loaded openapi %q with %d paths", doc.OpenAPI, len(doc.Paths.Map()))
	}
	// A query's arguments are any JSON value: the schema {} (it once was a
	// $ref to a RawMessage schema the document did not define).
	query := doc.Paths.Find("/v1/instances/{id}/queries/{name}")
	if query == nil || query.Post == nil || query.Post.RequestBody == nil {
		t.Fatal("no POST /v1/instances/{id}/queries/{name} with a request body")
	}
	body := query.Post.RequestBody.Value.Content.Get("application/json")
	if body == nil || body.Schema == nil || body.Schema.Ref != "" || body.Schema.Value.Type != nil {
		t.Fatalf("the query's body schema is %+v, want any JSON value", body)
	}
}

// TestOpenAPI_LibOpenAPI: libopenapi builds its model of the served
// document (which resolves every $ref), and its validator checks the
// document against the OpenAPI 3.1 specification's schema.
func TestOpenAPI_LibOpenAPI(t *testing.T) {
	b := served(t)
	doc, err := libopenapi.NewDocument(b)
	if err != nil {
		t.Fatalf("libopenapi does not read the document: %v", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("libopenapi does not build the document: %v", err)
	}
	if n := model.Model.Paths.PathItems.Len(); n == 0 {
		t.Fatal("libopenapi finds no paths")
	}
	for _, e := range model.Index.GetReferenceIndexErrors() {
		t.Errorf("libopenapi: %v", e)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("libopenapi-validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		var msgs []string
		for _, e := range verrs {
			msgs = append(msgs, e.Error())
			for _, se := range e.SchemaValidationErrors {
				msgs = append(msgs, "  "+se.KeywordLocation+" at "+se.FieldPath+": "+se.Reason)
			}
		}
		t.Fatalf("the document breaks the OpenAPI specification's schema:\n%s", strings.Join(msgs, "\n"))
	}
}
