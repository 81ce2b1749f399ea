//go:build ignore

// go_httpserver.go: a plain Go net/http server, the peer of http_wwr_client.c (PHYSICS §3,
// "client writes a request as header + body, then reads").
//
// POST /echo reads the whole request body and answers `ok <n> <bodylen>\n` (Go's server
// buffers the handler's output and sends headers + body with one write when the handler
// returns). Keep-alive, as net/http does by default. Nothing here is unusual: the server can
// only answer once the body is there, so while it waits for a body that the client's Nagle is
// holding, its kernel delays the ACK of the lone header segment (~40 ms).
//
// Prints `PORT <n>` once listening; exits once -max-conns connections have closed, after -idle
// without a connection, or at -deadline whatever happens.
//
// Build: go build -o go_httpserver go_httpserver.go
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

func main() {
	port := flag.Int("port", 0, "port (0 = any free port)")
	maxConns := flag.Int("max-conns", 1, "exit after this many connections have closed")
	idle := flag.Duration("idle", 5*time.Second, "exit if no connection arrives for this long; also the keep-alive idle timeout")
	deadline := flag.Duration("deadline", 120*time.Second, "exit after this long in any case")
	flag.Parse()
	time.AfterFunc(*deadline, func() { fmt.Fprintln(os.Stderr, "go_httpserver: deadline"); os.Exit(1) })

	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var mu sync.Mutex
	served, opened, closed := 0, 0, 0
	done := make(chan struct{})
	noConn := time.AfterFunc(*idle, func() { close(done) })

	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		served++
		n := served
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "ok %d %d\n", n, len(body))
	})
	srv := &http.Server{
		Handler:     mux,
		IdleTimeout: *idle,
		ReadTimeout: *idle,
		ConnState: func(c net.Conn, s http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch s {
			case http.StateNew:
				opened++
				noConn.Stop()
			case http.StateClosed, http.StateHijacked:
				closed++
				if closed == *maxConns {
					close(done)
				}
			}
		},
	}
	fmt.Printf("PORT %d\n", ln.Addr().(*net.TCPAddr).Port)
	go srv.Serve(ln)
	<-done
	srv.Close()
	mu.Lock()
	fmt.Fprintf(os.Stderr, "go_httpserver served %d requests on %d connections\n", served, opened)
	mu.Unlock()
}
