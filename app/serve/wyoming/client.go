package wyoming

import (
	"bufio"
	"context"
	"net"
	"time"
)

// Client is a Wyoming connection from the client's side (tests, tools).
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	lim  Limits
}

// Dial connects to a Wyoming server.
func Dial(ctx context.Context, addr string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return NewClient(c), nil
}

// NewClient wraps a connection.
func NewClient(c net.Conn) *Client {
	return &Client{conn: c, r: bufio.NewReaderSize(c, 64<<10), lim: Limits{MaxPayload: 16 << 20}}
}

// Write sends one event.
func (c *Client) Write(e *Event) error { return WriteEvent(c.conn, e) }

// WriteRaw sends bytes as they are (for tests of broken frames).
func (c *Client) WriteRaw(b []byte) error {
	_, err := c.conn.Write(b)
	return err
}

// Read reads one event, waiting at most timeout (0: forever).
func (c *Client) Read(timeout time.Duration) (*Event, error) {
	if timeout > 0 {
		c.conn.SetReadDeadline(time.Now().Add(timeout))
		defer c.conn.SetReadDeadline(time.Time{})
	}
	return ReadEvent(c.r, c.lim)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Conn is the underlying connection.
func (c *Client) Conn() net.Conn { return c.conn }
