package backend

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// bookmarkPrefix versions the bookmark format.
const bookmarkPrefix = "c1:"

// EncodeBookmark makes the opaque CorrelatedSearch bookmark that continues
// a search after the correlated event (createdAt, key); createdAt is in
// unix nanoseconds.
func EncodeBookmark(createdAt int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(bookmarkPrefix + strconv.FormatInt(createdAt, 10) + ":" + key))
}

// errBookmark says nothing of the bookmark: it may be of any size.
var errBookmark = fmt.Errorf("malformed search bookmark: %w", heraldtype.ErrInvalidArgument)

// maxBookmark is longer than any bookmark EncodeBookmark makes.
const maxBookmark = 2048

// DecodeBookmark reads a bookmark made by EncodeBookmark; anything else is
// refused with heraldtype.ErrInvalidArgument.
func DecodeBookmark(b string) (createdAt int64, key string, err error) {
	if len(b) > maxBookmark {
		return 0, "", errBookmark
	}
	raw, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil || !strings.HasPrefix(string(raw), bookmarkPrefix) {
		return 0, "", errBookmark
	}
	ts, key, ok := strings.Cut(strings.TrimPrefix(string(raw), bookmarkPrefix), ":")
	if !ok {
		return 0, "", errBookmark
	}
	createdAt, err = strconv.ParseInt(ts, 10, 64)
	if err != nil || (key != "" && storage.TextProblem(key, storage.MaxKeyBytes) != "") {
		return 0, "", errBookmark
	}
	return createdAt, key, nil
}

// SearchPage cuts the events a CorrelatedSearch read (limit+1 of them at
// most, in page order) to a page of limit and returns the bookmark of the
// next page: "" if this page is the last.
func SearchPage(events []*heraldtype.CorrelatedEvent, limit int) ([]*heraldtype.CorrelatedEvent, string) {
	if len(events) <= limit {
		return events, ""
	}
	events = events[:limit]
	last := events[limit-1]
	return events, EncodeBookmark(last.CreatedAt.UnixNano(), last.Key)
}
