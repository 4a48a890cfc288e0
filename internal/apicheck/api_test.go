package apicheck

import (
	"go/importer"
	"go/token"
	"go/types"
	"os/exec"
	"strings"
	"testing"
)

// TestPublicAPI_NamesNoInternalType: every exported identifier of every
// package outside internal/ (and outside cmd/) takes and returns only
// types another module can name; an internal type in a signature, a
// field or a method makes the package impossible to use from outside
// (as partition.Options.FS once was).
func TestPublicAPI_NamesNoInternalType(t *testing.T) {
	out, err := exec.Command("go", "list", "github.com/narad-io/storage/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil).(types.ImporterFrom)
	checked := 0
	for _, path := range strings.Fields(string(out)) {
		if strings.Contains(path, "/internal/") || strings.Contains(path, "/cmd/") {
			continue
		}
		pkg, err := imp.ImportFrom(path, "", 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		checked++
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			where := path + "." + name
			leak := internalIn(obj.Type(), map[types.Type]bool{}, true)
			if tn, ok := obj.(*types.TypeName); ok {
				leak = internalIn(tn.Type().Underlying(), map[types.Type]bool{}, true)
				if named, ok := tn.Type().(*types.Named); ok && leak == "" {
					for i := range named.NumMethods() {
						if m := named.Method(i); m.Exported() {
							if leak = internalIn(m.Type(), map[types.Type]bool{}, true); leak != "" {
								where += "." + m.Name()
								break
							}
						}
					}
				}
			}
			if leak != "" {
				t.Errorf("%s names %s, which another module cannot use", where, leak)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d packages; the list is wrong", checked)
	}
}

// internalIn names the first internal type t uses in its exported
// surface, or "". top is false below a named type: its own methods are
// its package's business, its exported fields are not.
func internalIn(t types.Type, seen map[types.Type]bool, top bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && strings.Contains(p.Path(), "/internal/") {
			return p.Path() + "." + t.Obj().Name()
		}
		for i := range t.TypeArgs().Len() {
			if s := internalIn(t.TypeArgs().At(i), seen, false); s != "" {
				return s
			}
		}
		return ""
	case *types.Pointer:
		return internalIn(t.Elem(), seen, top)
	case *types.Slice:
		return internalIn(t.Elem(), seen, top)
	case *types.Array:
		return internalIn(t.Elem(), seen, top)
	case *types.Map:
		if s := internalIn(t.Key(), seen, top); s != "" {
			return s
		}
		return internalIn(t.Elem(), seen, top)
	case *types.Chan:
		return internalIn(t.Elem(), seen, top)
	case *types.Signature:
		for _, tuple := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tuple.Len() {
				if s := internalIn(tuple.At(i).Type(), seen, top); s != "" {
					return s
				}
			}
		}
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() {
				if s := internalIn(f.Type(), seen, top); s != "" {
					return s
				}
			}
		}
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				if s := internalIn(m.Type(), seen, top); s != "" {
					return s
				}
			}
		}
	}
	return ""
}
