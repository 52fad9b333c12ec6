// Package backend holds helpers shared by the storage backends: parameter
// validation, bookmarks, time encoding.
//
// It also decodes the payload and failure columns both schemas store as
// JSON text. Everything here is pure and free of SQL; each backend keeps its own
// queries and wraps the errors returned here with its own prefix
// ("sqlite: ...", "postgres: ...").
package backend
