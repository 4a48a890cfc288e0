package sim

import (
	"errors"
	"os"
	"testing"
)

// TestHook_ReturnsTheInstalledHookToChainAndRestore: Hook gives back what
// SetHook installed (nil for none), so a hook installed for a while can
// call the earlier one on and put it back.
func TestHook_ReturnsTheInstalledHookToChainAndRestore(t *testing.T) {
	d := NewDisk(1)
	if d.Hook() != nil {
		t.Fatal("a new disk has a hook")
	}
	errFirst := errors.New("first")
	d.SetHook(func(c Call) error {
		if c.Op == OpMkdir {
			return errFirst
		}
		return nil
	})
	first := d.Hook()
	var seen []Op
	d.SetHook(func(c Call) error { seen = append(seen, c.Op); return first(c) })
	if err := d.Mkdir("/a"); !errors.Is(err, errFirst) {
		t.Fatalf("the chained hook: %v, want the first hook's error", err)
	}
	d.SetHook(first)
	if _, err := d.OpenFile("/b", os.O_RDWR|os.O_CREATE); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != OpMkdir {
		t.Fatalf("the second hook saw %v after it was replaced, want [mkdir]", seen)
	}
}
