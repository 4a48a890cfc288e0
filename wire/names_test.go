package wire

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"
)

func TestSegmentFileName_TwentyDigits(t *testing.T) {
	cases := []struct {
		offset int64
		name   string
	}{
		{0, "00000000000000000000.log"},
		{450832, "00000000000000450832.log"},
		{math.MaxInt64, "09223372036854775807.log"},
	}
	for _, c := range cases {
		got, err := SegmentFileName(c.offset)
		if err != nil || got != c.name {
			t.Fatalf("SegmentFileName(%d) = %q, %v; want %q", c.offset, got, err, c.name)
		}
		back, err := ParseSegmentFileName(c.name)
		if err != nil || back != c.offset {
			t.Fatalf("ParseSegmentFileName(%q) = %d, %v", c.name, back, err)
		}
	}
	_, err := SegmentFileName(-1)
	wantErr(t, err, ErrInvalidInput)
}

func TestParseSegmentFileName_Rejects(t *testing.T) {
	for _, name := range []string{
		"",
		".log",
		"0000000000000000000.log",   // 19 digits
		"000000000000000000000.log", // 21 digits
		"00000000000000000000",      // no suffix
		"00000000000000000000.LOG",
		"00000000000000000000.log.tmp",
		"00000000000000000000.logx",
		"x00000000000000000000.log",
		"+0000000000000000001.log",
		"-0000000000000000001.log",
		"0000000000000000000a.log",
		"0000000000000000000 .log",
		"000000000000000000_1.log",
		"0000000000000000000\u0661.log", // ARABIC-INDIC DIGIT ONE
		"09223372036854775808.log",      // MaxInt64 + 1
		"18446744073709551616.log",      // over uint64
		"99999999999999999999.log",
		"hwm",
		"consumer.offset",
	} {
		_, err := ParseSegmentFileName(name)
		if err == nil {
			t.Errorf("ParseSegmentFileName(%q) accepted", name)
			continue
		}
		wantErr(t, err, ErrBadName)
	}
}

func TestPartitionDirName_FiveDigits(t *testing.T) {
	for _, c := range []struct {
		p    int
		name string
	}{{0, "p00000"}, {3, "p00003"}, {99999, "p99999"}} {
		got, err := PartitionDirName(c.p)
		if err != nil || got != c.name {
			t.Fatalf("PartitionDirName(%d) = %q, %v", c.p, got, err)
		}
		back, err := ParsePartitionDirName(c.name)
		if err != nil || back != c.p {
			t.Fatalf("ParsePartitionDirName(%q) = %d, %v", c.name, back, err)
		}
	}
	for _, p := range []int{-1, MaxPartitions, math.MaxInt} {
		_, err := PartitionDirName(p)
		wantErr(t, err, ErrInvalidInput)
	}
}

func TestParsePartitionDirName_Rejects(t *testing.T) {
	for _, name := range []string{"", "p", "p0000", "p000000", "P00003", "q00003", "p0000a", "p-0003", "p+0003", "p 0003", "00003", "p00003 ", "p\u06610000"} {
		_, err := ParsePartitionDirName(name)
		if err == nil {
			t.Errorf("ParsePartitionDirName(%q) accepted", name)
			continue
		}
		wantErr(t, err, ErrBadName)
	}
}

func TestValidateTopicName_HTTPRule(t *testing.T) {
	// docs/http-api.md: 1 to 200 characters of [A-Za-z0-9._-], not "." or "..",
	// and not containing ".stale-".
	valid := []string{"orders", "a", "A-Z_0.9", "...", ".hidden", "stale-x", "a.stale", strings.Repeat("x", 200), "-", "_"}
	for _, name := range valid {
		if err := ValidateTopicName(name); err != nil {
			t.Errorf("ValidateTopicName(%q) = %v", name, err)
		}
	}
	invalid := []string{
		"", ".", "..", strings.Repeat("x", 201),
		"a.stale-b", ".stale-", "orders.stale-3f9a1c0e7b2d4a61",
		"a/b", "a b", "a\x00b", "ordérs", "a:b", "a*b", "a\\b", "..\x2fetc",
	}
	for _, name := range invalid {
		err := ValidateTopicName(name)
		if err == nil {
			t.Errorf("ValidateTopicName(%q) accepted", name)
			continue
		}
		wantErr(t, err, ErrBadName)
	}
}

func TestStaleDirName_QuarantineNameRoundTrips(t *testing.T) {
	// Design "The incarnation marker": topics/<name>.stale-<oldid>.
	name, err := StaleDirName("orders", "3f9a1c0e7b2d4a61")
	if err != nil || name != "orders.stale-3f9a1c0e7b2d4a61" {
		t.Fatalf("StaleDirName = %q, %v", name, err)
	}
	topic, id, ok := ParseStaleDirName(name)
	if !ok || topic != "orders" || id != "3f9a1c0e7b2d4a61" {
		t.Fatalf("ParseStaleDirName(%q) = %q, %q, %v", name, topic, id, ok)
	}
	for _, c := range []struct {
		topic string
		id    IncarnationID
	}{{"", "3f9a1c0e7b2d4a61"}, {"a.stale-b", "3f9a1c0e7b2d4a61"}, {"orders", ""}, {"orders", "3F9A1C0E7B2D4A61"}, {"orders", "0000000000000000"}} {
		_, err := StaleDirName(c.topic, c.id)
		wantErr(t, err, ErrInvalidInput)
	}
}

func TestParseStaleDirName_Rejects(t *testing.T) {
	for _, name := range []string{
		"orders",                         // a live topic is never stale
		"orders.stale-",                  // no id
		".stale-3f9a1c0e7b2d4a61",        // no topic
		"orders.stale-3f9a1c0e7b2d4a6",   // 15 hex
		"orders.stale-3f9a1c0e7b2d4a611", // 17 hex
		"orders.stale-3F9A1C0E7B2D4A61",  // upper case
		"orders.stale-0000000000000000",  // reserved id
		"a.stale-3f9a1c0e7b2d4a61.stale-3f9a1c0e7b2d4a61",
		"a/b.stale-3f9a1c0e7b2d4a61",
		"..stale-3f9a1c0e7b2d4a61", // topic "." is invalid
	} {
		if topic, id, ok := ParseStaleDirName(name); ok {
			t.Errorf("ParseStaleDirName(%q) = %q, %q, true", name, topic, id)
		}
	}
}

func TestFixedFileNames(t *testing.T) {
	// Design "On disk": these names are the format.
	for got, want := range map[string]string{
		TopicsDirName:          "topics",
		LostDirName:            "lost",
		IncarnationFileName:    "incarnation",
		HWMFileName:            "hwm",
		ConsumerOffsetFileName: "consumer.offset",
		ConsumerAheadFileName:  "consumer.ahead",
		SegmentFileSuffix:      ".log",
		StaleDirInfix:          ".stale-",
	} {
		if got != want {
			t.Errorf("constant %q, want %q", got, want)
		}
	}
}

func TestNameParsers_DoNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseSegmentFileName("00000000000000450832.log") }); n != 0 {
		t.Errorf("ParseSegmentFileName allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ParsePartitionDirName("p00003") }); n != 0 {
		t.Errorf("ParsePartitionDirName allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = ValidateTopicName("orders") }); n != 0 {
		t.Errorf("ValidateTopicName allocates %v times", n)
	}
}

func FuzzParseSegmentFileName(f *testing.F) {
	f.Add("00000000000000000000.log")
	f.Add("09223372036854775807.log")
	f.Add("09223372036854775808.log")
	f.Add("+0000000000000000001.log")
	f.Fuzz(func(t *testing.T, name string) {
		offset, err := ParseSegmentFileName(name)
		if err != nil {
			wantErr(t, err, ErrBadName)
			return
		}
		if again, err := SegmentFileName(offset); err != nil || again != name {
			t.Fatalf("SegmentFileName(%d) = %q, %v; parsed from %q", offset, again, err, name)
		}
	})
}

func FuzzParsePartitionDirName(f *testing.F) {
	f.Add("p00000")
	f.Add("p99999")
	f.Add("p-0001")
	f.Fuzz(func(t *testing.T, name string) {
		p, err := ParsePartitionDirName(name)
		if err != nil {
			wantErr(t, err, ErrBadName)
			return
		}
		if again, err := PartitionDirName(p); err != nil || again != name {
			t.Fatalf("PartitionDirName(%d) = %q, %v; parsed from %q", p, again, err, name)
		}
	})
}

var topicRule = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

func FuzzValidateTopicName(f *testing.F) {
	for _, seed := range []string{"orders", ".", "..", "a.stale-b", strings.Repeat("x", 200), "ordérs"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateTopicName(name)
		// An independent statement of the http-api rule.
		want := topicRule.MatchString(name) && name != "." && name != ".." && !strings.Contains(name, ".stale-")
		if (err == nil) != want {
			t.Fatalf("ValidateTopicName(%q) = %v, rule says valid=%v", name, err, want)
		}
		if err != nil {
			wantErr(t, err, ErrBadName)
			return
		}
		stale, err := StaleDirName(name, "3f9a1c0e7b2d4a61")
		if err != nil {
			t.Fatal(err)
		}
		if topic, id, ok := ParseStaleDirName(stale); !ok || topic != name || id != "3f9a1c0e7b2d4a61" {
			t.Fatalf("ParseStaleDirName(%q) = %q, %q, %v", stale, topic, id, ok)
		}
		if _, _, ok := ParseStaleDirName(name); ok {
			t.Fatalf("valid topic %q parses as a stale directory", name)
		}
	})
}

func FuzzParseStaleDirName(f *testing.F) {
	f.Add("orders.stale-3f9a1c0e7b2d4a61")
	f.Add("a.stale-3f9a1c0e7b2d4a61.stale-3f9a1c0e7b2d4a61")
	f.Fuzz(func(t *testing.T, name string) {
		topic, id, ok := ParseStaleDirName(name)
		if !ok {
			return
		}
		if again, err := StaleDirName(topic, id); err != nil || again != name {
			t.Fatalf("StaleDirName(%q, %q) = %q, %v; parsed from %q", topic, id, again, err, name)
		}
	})
}

// TestCursorFileName_RoundTripsAndRefuses: a valid cursor's file name
// parses back to it; bad names and other files of a partition directory
// are not cursor files.
func TestCursorFileName_RoundTripsAndRefuses(t *testing.T) {
	for _, name := range []string{"audit", "a.b-c_D9", strings.Repeat("x", MaxCursorNameLen)} {
		file, err := CursorFileName(name)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if back, ok := ParseCursorFileName(file); !ok || back != name {
			t.Fatalf("%q -> %q -> %q, %v", name, file, back, ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", MaxCursorNameLen+1)} {
		if _, err := CursorFileName(bad); !errors.Is(err, ErrBadName) {
			t.Fatalf("cursor name %q: %v, want ErrBadName", bad, err)
		}
	}
	for _, other := range []string{"hwm", "consumer.offset", "consumer.ahead", "00000000000000000000.log", "cursor.", "cursor.a b"} {
		if _, ok := ParseCursorFileName(other); ok {
			t.Fatalf("%q parses as a cursor file", other)
		}
	}
}

func FuzzParseCursorFileName(f *testing.F) {
	f.Add("cursor.audit")
	f.Add("cursor.cursor.x")
	f.Fuzz(func(t *testing.T, file string) {
		name, ok := ParseCursorFileName(file)
		if !ok {
			return
		}
		if again, err := CursorFileName(name); err != nil || again != file {
			t.Fatalf("CursorFileName(%q) = %q, %v; parsed from %q", name, again, err, file)
		}
	})
}
