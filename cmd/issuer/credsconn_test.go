package main

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// credsConn is a connection made with a .creds file, collecting its async
// errors and noting when the server closed it.
type credsConn struct {
	*nats.Conn
	errs   chan error
	closed chan struct{}
}

// dialCreds connects to url as the user of the .creds file, with name's
// inbox prefix and no reconnection; the connection closes with the test.
func dialCreds(t *testing.T, url, file, name string) (*credsConn, error) {
	c := &credsConn{errs: make(chan error, 16), closed: make(chan struct{})}
	nc, err := nats.Connect(url, nats.UserCredentials(file), nats.CustomInboxPrefix("_INBOX."+name), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case c.errs <- err:
			default:
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(c.closed) }))
	if err != nil {
		return nil, err
	}
	c.Conn = nc
	t.Cleanup(nc.Close)
	return c, nil
}
