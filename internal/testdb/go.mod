module github.com/heraldwf/herald/internal/testdb

go 1.26.0

require github.com/jackc/pgx/v5 v5.12.0

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

// Local modules: the go.work at the root ties them for development; these
// replaces let this module build on its own (GOWORK=off) too.
replace (
	github.com/heraldwf/herald => ../..
	github.com/heraldwf/herald/cmd/herald => ../../cmd/herald
	github.com/heraldwf/herald/internal/apitest => ../../internal/apitest
	github.com/heraldwf/herald/internal/crashfs => ../../internal/crashfs
	github.com/heraldwf/herald/internal/storeurl => ../../internal/storeurl
	github.com/heraldwf/herald/storage/postgres => ../../storage/postgres
	github.com/heraldwf/herald/webui => ../../webui
)
