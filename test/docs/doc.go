// Package docs tests that the documentation under docs/ (and the README)
// stays true: every relative link resolves (links_test.go), every citation
// of docs/ in code, charts and scripts names a file and an openstack.md
// section that exist (citations_test.go), the flag and environment-variable
// reference matches each binary's -h (flags_test.go), and every command of
// docs/tutorial.md runs against a demo started by scripts/demo.sh, with the
// output the tutorial shows (tutorial_test.go), and every command the demo
// prints works as printed (demo_test.go).
package docs
