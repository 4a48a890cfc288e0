package httpapi

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// connAuth is a connection's: whether a request on it has presented the
// token. Kept in each request's context (http.Server.ConnContext).
type connAuth struct{ authenticated atomic.Bool }

type connAuthKey struct{}

// unauthenticatedFor (a variable for tests) is how long a connection may stay open before a
// request on it presents the token (with one configured), whatever the
// protocol: HTTP/2 has no header timeout to close a silent one.
var unauthenticatedFor = 10 * time.Second

// ConnContext is the server's ConnContext without a token.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connAuthKey{}, &connAuth{})
}

// ConnContextWithAuthDeadline is the server's ConnContext with a token: a
// connection that has not authenticated within unauthenticatedFor is
// closed.
func ConnContextWithAuthDeadline(ctx context.Context, c net.Conn) context.Context {
	auth := &connAuth{}
	time.AfterFunc(unauthenticatedFor, func() {
		if !auth.authenticated.Load() {
			c.Close()
		}
	})
	return context.WithValue(ctx, connAuthKey{}, auth)
}

// connAuthOf is the request's connection's state; nil outside a server
// (a test's recorder).
func connAuthOf(ctx context.Context) *connAuth {
	a, _ := ctx.Value(connAuthKey{}).(*connAuth)
	return a
}
