package cluster

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// TestImports_NoHTTP: package cluster speaks to other nodes only through
// a Transfer, so it never imports net/http (nor a package under it): the
// HTTP side of a move is package server's. (Its dependencies do, the etcd
// client's gRPC among them: what is checked is this package's own
// imports.)
func TestImports_NoHTTP(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pkg.Imports, "github.com/narad-io/storage/runtime") {
		t.Fatalf("the import list %v lacks runtime: the check reads the wrong package", pkg.Imports)
	}
	for _, path := range pkg.Imports {
		if path == "net/http" || strings.HasPrefix(path, "net/http/") {
			t.Errorf("package cluster imports %s: the node-to-node calls belong behind Transfer", path)
		}
	}
}
