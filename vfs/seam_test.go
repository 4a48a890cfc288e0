package vfs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// forbidden are the calls that bypass the seam: a package that makes them
// cannot have faults injected into it.
var forbidden = map[string]map[string]bool{
	"os": {"Open": true, "OpenFile": true, "Create": true, "Remove": true, "RemoveAll": true,
		"Rename": true, "Truncate": true, "Mkdir": true, "MkdirAll": true, "ReadDir": true,
		"ReadFile": true, "WriteFile": true, "Chmod": true, "Link": true, "Symlink": true},
	"unix":    {"Fdatasync": true, "Fsync": true, "Open": true, "Openat": true, "Fadvise": true, "Unlink": true, "Renameat": true},
	"syscall": {"Fdatasync": true, "Fsync": true, "Open": true, "Unlink": true, "Rename": true},
}

// TestSeam_NoFileCallsOutsideFsys fails if any non-test file outside this
// package and bench/ calls the file system directly.
func TestSeam_NoFileCallsOutsideVFS(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if e.IsDir() {
			if rel == "vfs" || rel == "bench" || rel == "examples" || strings.HasPrefix(e.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		checked++
		file, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && forbidden[pkg.Name][sel.Sel.Name] {
				t.Errorf("%s calls %s.%s: go through vfs", rel, pkg.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no Go file checked: the walk is broken")
	}
}
