package main

// How consume prints a record: a format of verbs (kcat's -f, in its
// spelling), or JSON lines.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/narad-io/storage/client"
)

// formatVerbs are what a format's %X prints of a record.
const formatVerbs = `%t topic, %p partition, %o offset, %k key, %K key length, %s value, %S value length, %T commit time (ms since the epoch), %% a percent sign; \n \t \r \\ escapes`

// defaultFormat is consume's text line: partition, offset, key and value,
// tab-separated, bytes as stored.
const defaultFormat = `%p\t%o\t%k\t%s\n`

// recordFormat is a parsed format: literal text and verbs, in order.
type recordFormat []formatPiece

type formatPiece struct {
	literal string
	verb    byte // 0: the literal
}

// parseFormat reads a format; an unknown verb or escape, or a lone % or \
// at the end, is refused.
func parseFormat(s string) (recordFormat, error) {
	var f recordFormat
	lit := []byte{}
	flush := func() {
		if len(lit) > 0 {
			f = append(f, formatPiece{literal: string(lit)})
			lit = []byte{}
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			if i+1 == len(s) {
				return nil, fmt.Errorf("format %q ends in %%: want a verb after it (%s)", s, formatVerbs)
			}
			i++
			switch v := s[i]; v {
			case 't', 'p', 'o', 'k', 'K', 's', 'S', 'T':
				flush()
				f = append(f, formatPiece{verb: v})
			case '%':
				lit = append(lit, '%')
			default:
				return nil, fmt.Errorf("format %q: unknown verb %%%c (%s)", s, v, formatVerbs)
			}
		case '\\':
			if i+1 == len(s) {
				return nil, fmt.Errorf(`format %q ends in \: want n, t, r or \ after it`, s)
			}
			i++
			switch s[i] {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, fmt.Errorf(`format %q: unknown escape \%c (\n, \t, \r, \\)`, s, s[i])
			}
		default:
			lit = append(lit, s[i])
		}
	}
	flush()
	return f, nil
}

// append appends r, of partition p of topic, as f says.
func (f recordFormat) append(dst []byte, topic string, p int, r client.FetchedRecord) []byte {
	for _, piece := range f {
		switch piece.verb {
		case 0:
			dst = append(dst, piece.literal...)
		case 't':
			dst = append(dst, topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(p), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 'K':
			dst = strconv.AppendInt(dst, int64(len(r.Key)), 10)
		case 's':
			dst = append(dst, r.Value...)
		case 'S':
			dst = strconv.AppendInt(dst, int64(len(r.Value)), 10)
		case 'T':
			dst = strconv.AppendInt(dst, r.CommittedAt.UnixMilli(), 10)
		}
	}
	return dst
}

// jsonLine is a record as one JSON line: key and value as text, or both
// base64 with "encoding":"base64" when either is not UTF-8.
type jsonLine struct {
	Partition     int     `json:"partition"`
	Offset        int64   `json:"offset"`
	Key           *string `json:"key,omitempty"`
	Value         string  `json:"value"`
	Encoding      string  `json:"encoding,omitempty"`
	CommittedAtMs int64   `json:"committed_at_ms"`
}

// appendJSON appends r, of partition p, as a JSON line.
func appendJSON(dst []byte, p int, r client.FetchedRecord) []byte {
	line := jsonLine{Partition: p, Offset: r.Offset, Value: string(r.Value), CommittedAtMs: r.CommittedAt.UnixMilli()}
	if !utf8.Valid(r.Key) || !utf8.Valid(r.Value) {
		line.Encoding, line.Value = "base64", base64.StdEncoding.EncodeToString(r.Value)
	}
	if len(r.Key) > 0 {
		k := string(r.Key)
		if line.Encoding != "" {
			k = base64.StdEncoding.EncodeToString(r.Key)
		}
		line.Key = &k
	}
	b, _ := json.Marshal(line) // a struct of strings and numbers always encodes
	return append(append(dst, b...), '\n')
}

// recordPrinter prints records as --json or --format say.
type recordPrinter struct {
	topic  string
	asJSON bool
	format recordFormat
	buf    []byte
}

func (rp *recordPrinter) append(p int, r client.FetchedRecord) {
	if rp.asJSON {
		rp.buf = appendJSON(rp.buf, p, r)
		return
	}
	rp.buf = rp.format.append(rp.buf, rp.topic, p, r)
}
