// Package openapitest checks the OpenAPI document the HTTP API serves
// (GET /v1/openapi.json) with two independent OpenAPI implementations:
// github.com/getkin/kin-openapi (its loader and Validate) and
// github.com/pb33f/libopenapi (its document model and its validator of the
// document against the OpenAPI 3.1 schema). Generators refuse a document
// either of them refuses.
//
// It is a module of its own so that Herald's go.mod does not depend on
// these validators: a program importing Herald inherits none of them. Run
// it with
//
//	cd httpapi/openapitest && go test ./...
package openapitest
