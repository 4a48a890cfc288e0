package main

// The units of the topic command's retention flags: each takes the API's
// own unit (milliseconds, bytes) as a plain integer, or a human form
// (7d, 36h, 1h30m; 10GiB, 500MB), read exactly or refused.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// leadingDays is a duration's whole weeks or days, which time.ParseDuration
// does not take, and what follows them.
var leadingDays = regexp.MustCompile(`^([0-9]+)([dw])(.*)$`)

// parseMillis reads a retention age: an integer of milliseconds, or a
// duration (w and d, then anything time.ParseDuration takes: "7d",
// "1d12h", "90m"), a whole number of milliseconds from 0 up.
func parseMillis(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n, nil
	}
	bad := fmt.Errorf("%q: want milliseconds, or a duration such as 7d, 36h or 1h30m (units w, d, h, m, s, ms)", s)
	if s == "" {
		return 0, bad
	}
	var total time.Duration
	rest := s
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 64)
		unit := day
		if m[2] == "w" {
			unit = week
		}
		if err != nil || n > int64(math.MaxInt64/unit) {
			return 0, fmt.Errorf("%q is longer than any retention", s)
		}
		total, rest = time.Duration(n)*unit, m[3]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, bad
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("%q is longer than any retention", s)
		}
		total += d
	}
	if total%time.Millisecond != 0 {
		return 0, fmt.Errorf("%q is not a whole number of milliseconds", s)
	}
	return total.Milliseconds(), nil
}

// byteUnits are the suffixes parseBytes takes, lower-cased.
var byteUnits = map[string]int64{
	"b":  1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

var sizeForm = regexp.MustCompile(`^([0-9]+)([A-Za-z]+)$`)

// parseBytes reads a retention size: an integer of bytes, or a whole
// number and a unit (B, KB, MB, GB, TB in powers of 1000; KiB, MiB, GiB,
// TiB in powers of 1024; in any case).
func parseBytes(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n, nil
	}
	m := sizeForm.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q: want bytes, or a whole number and a unit such as 10GiB or 500MB", s)
	}
	unit, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("%q: unknown unit %q (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, errors.New(strconv.Quote(s) + " is more bytes than any retention")
	}
	return n * unit, nil
}

// formatMillis shows a retention age: "none" for 0, else its
// milliseconds and, when it is whole days or hours, that too.
func formatMillis(ms int64) string {
	switch {
	case ms == 0:
		return "none"
	case ms%int64(day/time.Millisecond) == 0:
		return fmt.Sprintf("%d ms (%dd)", ms, ms/int64(day/time.Millisecond))
	case ms%int64(time.Hour/time.Millisecond) == 0:
		return fmt.Sprintf("%d ms (%dh)", ms, ms/int64(time.Hour/time.Millisecond))
	}
	return fmt.Sprintf("%d ms", ms)
}

// formatBytes shows a retention size: "none" for 0, else its bytes and,
// when it is a whole number of a binary unit, that too.
func formatBytes(n int64) string {
	if n == 0 {
		return "none"
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d bytes (%d%s)", n, n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
