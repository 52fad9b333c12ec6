// Package doclinks holds the check that the repository's Markdown links
// resolve: every relative link of README.md, docs/*.md and bench/*.md names
// a file that exists and, when it has a #fragment, a heading of that file
// (GitHub's anchor rules). It has no code of its own; see links_test.go.
package doclinks
