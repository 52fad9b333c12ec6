package backend

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// bookmarkPrefix versions the bookmark format.
const bookmarkPrefix = "c1:"

// EncodeBookmark makes the opaque CorrelatedSearch bookmark that continues
// a search after the correlated event (createdAt, key); createdAt is in
// unix nanoseconds.
func EncodeBookmark(createdAt int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(bookmarkPrefix + strconv.FormatInt(createdAt, 10) + ":" + key))
}

// DecodeBookmark reads a bookmark made by EncodeBookmark.
func DecodeBookmark(b string) (createdAt int64, key string, err error) {
	raw, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil || !strings.HasPrefix(string(raw), bookmarkPrefix) {
		return 0, "", fmt.Errorf("invalid bookmark %q", b)
	}
	ts, key, ok := strings.Cut(strings.TrimPrefix(string(raw), bookmarkPrefix), ":")
	if !ok {
		return 0, "", fmt.Errorf("invalid bookmark %q", b)
	}
	createdAt, err = strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("invalid bookmark %q", b)
	}
	return createdAt, key, nil
}
