package serve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// capListener bounds open connections, in all and per client address. A connection over a
// cap is answered at once (refuse writes the protocol's "busy", e.g. an HTTP 429) and
// closed: one client cannot take every socket, and the server never holds more than max.
type capListener struct {
	net.Listener
	max, perClient int
	refuse         func(c net.Conn)

	mu sync.Mutex
	n  int
	by map[string]int
}

func newCapListener(ln net.Listener, max, perClient int, refuse func(net.Conn)) *capListener {
	return &capListener{Listener: ln, max: max, perClient: perClient, refuse: refuse, by: map[string]int{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := clientHost(c.RemoteAddr().String())
		l.mu.Lock()
		if l.n >= l.max || l.by[host] >= l.perClient {
			l.mu.Unlock()
			go func() {
				if l.refuse != nil {
					l.refuse(c)
				}
				lingerClose(c)
			}()
			continue
		}
		l.n++
		l.by[host]++
		l.mu.Unlock()
		return &cappedConn{Conn: c, l: l, host: host}, nil
	}
}

func (l *capListener) release(host string) {
	l.mu.Lock()
	l.n--
	if l.by[host]--; l.by[host] <= 0 {
		delete(l.by, host)
	}
	l.mu.Unlock()
}

type cappedConn struct {
	net.Conn
	l    *capListener
	host string
	once sync.Once
}

func (c *cappedConn) Close() error {
	c.once.Do(func() { c.l.release(c.host) })
	return c.Conn.Close()
}

// lingerClose ends a connection the client may still be writing to without a reset that
// would destroy the answer already sent: stop writing, swallow a little of what comes, close.
func lingerClose(c net.Conn) {
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		io.Copy(io.Discard, io.LimitReader(c, 256<<10))
	}
	c.Close()
}

// refuseHTTP answers a connection over the cap with a plain HTTP 429 in OpenAI's error shape,
// once the client has sent its request's head (an answer before the request would be an
// "unsolicited response" that clients drop).
func refuseHTTP(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReaderSize(io.LimitReader(c, 64<<10), 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 && err == nil {
			break // the blank line ending the head
		}
	}
	body := `{"error":{"message":"too many connections from this client; retry after 1 s","type":"requests","param":null,"code":"too_many_connections"}}` + "\n"
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"+body)
}
