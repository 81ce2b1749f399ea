//go:build ignore

// go_lineserver.go: the line-protocol server of lineserver.py, in Go with net's defaults
// (PHYSICS §1, §3, §4). Serves specimens/lineclient.py: `GET <i>\r\n` -> 8 lines
// `attr-<k>: value-<i>-<k>\r\n` and the terminator `.\r\n`.
//
//	-mode perline  One conn.Write() per line (9 writes per response). Go's net package sets
//	               TCP_NODELAY on every TCP connection it creates, so each write leaves at once as
//	               its own small segment: fragmented_writes server_to_client, but nothing is held
//	               behind Nagle, so NO nagle_delayed_ack on loopback.
//	-mode perline -nagle  The same writes after conn.SetNoDelay(false) (Nagle ON, as in C or
//	               Java): line 1 leaves, lines 2-9 wait for the client's delayed ACK (~40 ms).
//	               nagle_delayed_ack + fragmented_writes, server_to_client.
//	-mode fixed    One Write() per response (the twin of both).
//
// Prints `PORT <n>` once listening, serves -max-conns connections one at a time and exits; an
// idle connection (-idle) ends it, and the process exits at -deadline whatever happens.
//
// Build: go build -o go_lineserver go_lineserver.go
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	mode := flag.String("mode", "perline", "perline | fixed")
	nagle := flag.Bool("nagle", false, "SetNoDelay(false): turn Nagle back on")
	port := flag.Int("port", 0, "port (0 = any free port)")
	maxConns := flag.Int("max-conns", 1, "exit after this many connections")
	lines := flag.Int("lines", 8, "lines per response before the terminator")
	idle := flag.Duration("idle", 5*time.Second, "idle timeout")
	deadline := flag.Duration("deadline", 120*time.Second, "exit after this long in any case")
	flag.Parse()
	if *mode != "perline" && *mode != "fixed" {
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
	time.AfterFunc(*deadline, func() { fmt.Fprintln(os.Stderr, "go_lineserver: deadline"); os.Exit(1) })

	ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("PORT %d\n", ln.Addr().(*net.TCPAddr).Port)
	served, conns := 0, 0
	for conns < *maxConns {
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(*idle))
		c, err := ln.Accept()
		if err != nil {
			break
		}
		conns++
		tc := c.(*net.TCPConn)
		if *nagle {
			tc.SetNoDelay(false)
		}
		served += serve(tc, *mode == "perline", *lines, *idle)
		tc.Close()
	}
	fmt.Fprintf(os.Stderr, "go_lineserver mode=%s nagle=%v served %d requests on %d connections\n",
		*mode, *nagle, served, conns)
}

func serve(c *net.TCPConn, perLine bool, nLines int, idle time.Duration) int {
	r := bufio.NewReader(c)
	served := 0
	for {
		c.SetReadDeadline(time.Now().Add(idle))
		req, err := r.ReadString('\n')
		if err != nil {
			return served
		}
		parts := strings.Fields(req)
		i := "?"
		if len(parts) > 1 {
			i = parts[1]
		}
		var resp []byte
		for k := 1; k <= nLines+1; k++ {
			line := ".\r\n"
			if k <= nLines {
				line = fmt.Sprintf("attr-%d: value-%s-%d\r\n", k, i, k)
			}
			if perLine {
				if _, err := c.Write([]byte(line)); err != nil { // one write() per line
					return served
				}
			} else {
				resp = append(resp, line...)
			}
		}
		if !perLine {
			if _, err := c.Write(resp); err != nil { // one write() per response
				return served
			}
		}
		served++
	}
}
