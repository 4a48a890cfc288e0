package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/narad-io/storage/api"
)

// Exact input: every query parameter and JSON field a request carries is
// one its endpoint takes, or the request is refused naming it; bytes are
// never changed on the way in (invalid UTF-8 in a JSON text is refused,
// never replaced). Error messages speak in the request's own terms: the
// parameter, the field, the record's index; never a Go type.

// query reads the request's query parameters, answering 400
// invalid_parameter itself for one the endpoint does not take (known) or
// one given twice.
func query(w http.ResponseWriter, r *http.Request, known ...string) (url.Values, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, "the query string is not valid URL encoding")
		return nil, false
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(known, name) {
			takes := "no parameters"
			if len(known) > 0 {
				takes = "only " + strings.Join(known, ", ")
			}
			writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("unknown parameter %q: this endpoint takes %s", name, takes))
			return nil, false
		}
		if len(q[name]) > 1 {
			writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("parameter %q given %d times", name, len(q[name])))
			return nil, false
		}
	}
	return q, true
}

// base64Param reads encoding: text (the default) or base64.
func base64Param(w http.ResponseWriter, q url.Values) (b64, ok bool) {
	switch v := q.Get("encoding"); v {
	case "", "text":
		return false, true
	case "base64":
		return true, true
	default:
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("encoding %q: want text or base64", v))
		return false, false
	}
}

// decimal reads a whole number from 0 up in its one canonical form, as a
// path's partition number is read: decimal digits, no sign, no leading
// zero, within int64. Every integer of a query and a path is read by it.
func decimal(s string) (int64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// intParam reads the integer parameter name, def when absent, answering
// 400 invalid_parameter itself when it is not an integer from lo to hi
// (lo >= 0) in canonical decimal.
func intParam(w http.ResponseWriter, q url.Values, name string, def, lo, hi int) (int, bool) {
	s, ok := q[name]
	if !ok {
		return def, true
	}
	v, ok := decimal(s[0])
	if !ok || v < int64(lo) || v > int64(hi) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidParameter, fmt.Sprintf("%s must be an integer from %d to %d, not %q", name, lo, hi, s[0]))
		return 0, false
	}
	return int(v), true
}

// decodeJSON reads a JSON body into v, a pointer to a struct: one
// object, no trailing data, each field one of v's by its exact name and
// given once (encoding/json alone matches names in any case and lets a
// repeated field win). Its errors are worded for the client.
func decodeJSON(r *http.Request, v any) error {
	fields := fieldsOf(v)
	dec := json.NewDecoder(r.Body)
	if tok, err := dec.Token(); err != nil {
		return jsonError(err, fields)
	} else if tok != json.Delim('{') {
		return fmt.Errorf("the body must be a JSON object, not %s", tokenName(tok))
	}
	exact := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonInsideError(err)
		}
		name, _ := tok.(string)
		if !slices.Contains(fields, name) {
			return fmt.Errorf("unknown field %q: the body has only %s", name, strings.Join(quoted(fields), ", "))
		}
		if _, twice := exact[name]; twice {
			return fmt.Errorf("field %q given twice", name)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return jsonInsideError(err)
		}
		exact[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return jsonInsideError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	b, err := json.Marshal(exact)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return jsonError(err, fields)
	}
	return nil
}

// fieldsOf lists the JSON fields of the struct v points to.
func fieldsOf(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// jsonError words an error of encoding/json for the client: what was
// wrong and where, in JSON's terms. fields are those the body may have.
func jsonError(err error, fields []string) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case isTooLarge(err):
		return err
	case errors.Is(err, io.EOF):
		return errors.New("the body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the body ends inside its JSON value")
	case errors.As(err, &syntax):
		return fmt.Errorf("the body is not JSON: %s (at byte %d)", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		if lo, hi, ok := intRange(typ.Type); ok && isIntegerLiteral(typ.Value) {
			// An integer the field's type cannot hold: name its range.
			return fmt.Errorf("%s: %s is not an integer from %s to %s", field, strings.TrimPrefix(typ.Value, "number "), lo, hi)
		}
		return fmt.Errorf("%s must be %s, not %s", field, jsonKind(typ.Type), jsonArticle(typ.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s: the body has only %s", name, strings.Join(quoted(fields), ", "))
	}
	return errors.New("the body is not a JSON object of the expected shape")
}

// jsonInsideError is jsonError for an error met inside the body's value,
// where its end is a cut.
func jsonInsideError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return jsonError(err, nil)
}

// intRange is the range of an integer type (through pointers and
// slices), in decimal; ok is false for any other type.
func intRange(t reflect.Type) (lo, hi string, ok bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return strconv.FormatInt(-1<<(bits-1), 10), strconv.FormatInt(1<<(bits-1)-1, 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "0", strconv.FormatUint(1<<t.Bits()-1, 10), true
	}
	return "", "", false
}

// isIntegerLiteral reports an encoding/json value name ("number -1") of a
// JSON number without a fraction or an exponent.
func isIntegerLiteral(v string) bool {
	n, ok := strings.CutPrefix(v, "number ")
	n = strings.TrimPrefix(n, "-")
	return ok && n != "" && strings.TrimLeft(n, "0123456789") == ""
}

// jsonKind names, in JSON's words, what a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonArticle puts an article before encoding/json's name of a value.
func jsonArticle(v string) string {
	if first, _, _ := strings.Cut(v, " "); first == "number" {
		return "a number (" + v + ")" // "number -1.5": a number out of range or with a fraction
	}
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number", "bool":
		return "a " + v
	}
	return v
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strconv.Quote(n)
	}
	return out
}

// jsonText decodes one JSON string exactly. Invalid UTF-8, raw or as an
// escaped lone surrogate, is refused: encoding/json would replace it with
// U+FFFD, and the record stored would not be the one sent.
func jsonText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", errors.New("must be a string")
	}
	if !utf8.Valid(raw) {
		return "", errors.New("is not valid UTF-8; send bytes with encoding=base64")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errors.New("is not a valid JSON string")
	}
	// Every U+FFFD decoded must have been sent: as itself, or escaped.
	const replacement = "\uFFFD"
	if got := strings.Count(s, replacement); got > 0 {
		sent := bytes.Count(raw, []byte(replacement)) + countFold(raw, `\ufffd`)
		if got > sent {
			return "", errors.New("holds an escaped lone surrogate (\\ud800 to \\udfff), which is not text; send bytes with encoding=base64")
		}
	}
	return s, nil
}

// countFold counts the case-insensitive occurrences of an escape in raw,
// skipping escaped backslashes.
func countFold(raw []byte, esc string) int {
	n := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+len(esc) <= len(raw) && strings.EqualFold(string(raw[i:i+len(esc)]), esc) {
			n++
		}
		i++ // the escaped character is not the start of another escape
	}
	return n
}
