// Package doclinks holds the checks that keep the repository's Markdown
// true to itself and to the code: every relative link of README.md,
// docs/*.md and bench/*.md names a file that exists and, with a
// #fragment, a heading of that file (GitHub's anchor rules); and the
// heraldtest functions the README and docs/testing.md print are those of
// heraldtest/example_test.go, word for word. It has no code of its own;
// see links_test.go and examples_test.go.
package doclinks
