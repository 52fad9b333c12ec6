module github.com/heraldwf/herald/internal/storeurl

go 1.26.0

require (
	github.com/heraldwf/herald v0.0.0
	github.com/heraldwf/herald/internal/testdb v0.0.0-00010101000000-000000000000
	github.com/heraldwf/herald/storage/postgres v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	modernc.org/sqlite v1.61.1
)

require (
	github.com/dustin/go-humanize v1.1.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/heraldwf/herald/internal/crashfs v0.0.0-00010101000000-000000000000 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/ncruces/go-strftime v1.1.0 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	modernc.org/libc v1.79.0 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
)

// Local modules: the go.work at the root ties them for development; these
// replaces let this module build on its own (GOWORK=off) too.
replace (
	github.com/heraldwf/herald => ../..
	github.com/heraldwf/herald/cmd/herald => ../../cmd/herald
	github.com/heraldwf/herald/internal/apitest => ../../internal/apitest
	github.com/heraldwf/herald/internal/crashfs => ../../internal/crashfs
	github.com/heraldwf/herald/internal/testdb => ../../internal/testdb
	github.com/heraldwf/herald/storage/postgres => ../../storage/postgres
	github.com/heraldwf/herald/webui => ../../webui
)
