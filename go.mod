module github.com/heraldwf/herald

go 1.26
