package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Options configure a Client. The zero value is a client without a token,
// over plain HTTP or the system's trusted roots.
type Options struct {
	// Token is the bearer token of a daemon started with
	// --auth-token-file.
	Token string
	// TLSConfig is the TLS configuration of https addresses (a private
	// CA's pool in RootCAs, for one); nil is the system's defaults.
	TLSConfig *tls.Config
	// HTTPClient, if set, makes every request instead of the client's own
	// (TLSConfig is then the caller's to set on it).
	HTTPClient *http.Client
	// Retries is how many times a request is sent again, with backoff
	// from 50 ms (or the server's Retry-After), when the answer says
	// nothing was done: 503 busy (no open-log slot or descriptor free)
	// for any request, 503 commit_failed for a produce. 0 is 3, a
	// negative value none.
	Retries int
}

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	token   string
	http    *http.Client
	retries int
}

// New returns a client of the daemon at addr: a URL (http://host:port,
// https://host:port) or host:port, taken as http, or as https when
// opts.TLSConfig is set.
func New(addr string, opts Options) (*Client, error) {
	base, err := parseAddr(addr, opts.TLSConfig != nil)
	if err != nil {
		return nil, err
	}
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = opts.TLSConfig
		tr.MaxIdleConnsPerHost = 32 // keep-alive: a connection per concurrent call, reused
		hc = &http.Client{Transport: tr}
	}
	retries := opts.Retries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 0
	}
	return &Client{base: base, token: opts.Token, http: hc, retries: retries}, nil
}

// parseAddr reads a daemon's address: a URL with a scheme, or host:port.
func parseAddr(addr string, tlsOn bool) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		scheme := "http"
		if tlsOn {
			scheme = "https"
		}
		addr = scheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("narad: address %q: want host:port, http://host:port or https://host:port", addr)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// request is one call: its method, path (escaped by the caller), query,
// body and content type, and the header to send.
type request struct {
	method      string
	path        string
	query       url.Values
	body        []byte
	contentType string
	accept      string
}

// do sends req and returns the answer when it is a success; an error
// answer is an *Error.
// do sends req, again after a backoff while the answer is 503 busy (the
// node did nothing), up to the client's retries.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.send(ctx, req)
		if !errors.Is(err, ErrBusy) || attempt >= c.retries {
			return resp, err
		}
		if err := backoff(ctx, attempt, err); err != nil {
			return nil, err
		}
	}
}

// send sends req once.
func (c *Client) send(ctx context.Context, req request) (*http.Response, error) {
	u := *c.base
	u.Path += req.path
	u.RawQuery = req.query.Encode()
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), bytes.NewReader(req.body))
	if err != nil {
		return nil, err
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer drain(resp)
	return nil, errorOf(resp)
}

// errorOf reads an error answer.
func errorOf(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{Status: resp.StatusCode}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		StartOffset *int64 `json:"start_offset"`
		NextOffset  *int64 `json:"next_offset"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.StartOffset, e.NextOffset = body.Error.Code, body.Error.Message, body.StartOffset, body.NextOffset
	} else {
		e.Code, e.Message = "http_"+strconv.Itoa(resp.StatusCode), strings.TrimSpace(string(b))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// drain reads what is left of a body and closes it, so the connection is
// reused.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// doJSON sends a JSON body (nil for none) and decodes a JSON answer into
// out (nil to discard it).
func (c *Client) doJSON(ctx context.Context, method, path string, in, out any) error {
	req := request{method: method, path: path}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		req.body, req.contentType = b, "application/json"
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("narad: %s %s: the answer is not the API's JSON: %w", method, path, err)
	}
	return nil
}

// backoff waits before retry n (0, 1, ...): the server's Retry-After if it
// gave one, else 50 ms doubling, capped at 2 s.
func backoff(ctx context.Context, n int, err error) error {
	wait := min(50*time.Millisecond<<n, 2*time.Second)
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		wait = e.RetryAfter
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func topicPath(topic string) string { return "/v1/topics/" + url.PathEscape(topic) }

func partitionPath(topic string, p int) string {
	return topicPath(topic) + "/partitions/" + strconv.Itoa(p)
}
