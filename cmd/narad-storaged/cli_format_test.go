package main

import (
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// TestFormat_VerbsAndEscapes: each verb prints its part of a record, the
// escapes their byte; anything else is refused naming what is wrong.
func TestFormat_VerbsAndEscapes(t *testing.T) {
	r := client.FetchedRecord{Offset: 41, Key: []byte("user-42"), Value: []byte("a\tb"), CommittedAt: time.UnixMilli(1764450000123)}
	for spec, want := range map[string]string{
		defaultFormat:             "3\t41\tuser-42\ta\tb\n",
		`%t %p %o %k %K %s %S %T`: "orders 3 41 user-42 7 a\tb 3 1764450000123",
		`100%% \\ \r\n`:           "100% \\ \r\n",
		`value=%s`:                "value=a\tb",
		``:                        "",
	} {
		f, err := parseFormat(spec)
		if err != nil {
			t.Fatalf("parseFormat(%q): %v", spec, err)
		}
		if got := string(f.append(nil, "orders", 3, r)); got != want {
			t.Errorf("format %q: %q, want %q", spec, got, want)
		}
	}
	for _, spec := range []string{`%`, `%x`, `%d`, `\`, `\q`, `abc%`} {
		if _, err := parseFormat(spec); err == nil {
			t.Errorf("parseFormat(%q) was accepted", spec)
		}
	}
}

// FuzzParseFormat: any format is read or refused, never a panic, and a
// format read prints any record.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{defaultFormat, `%t/%p@%o %k=%s (%K+%S) %T 100%%\n`, `\`, `%`, `\\%%`} {
		f.Add(s, []byte("k"), []byte("v"))
	}
	f.Fuzz(func(t *testing.T, spec string, key, value []byte) {
		format, err := parseFormat(spec)
		if err != nil {
			return
		}
		format.append(nil, "t", 0, client.FetchedRecord{Key: key, Value: value})
	})
}
