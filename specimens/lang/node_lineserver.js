#!/usr/bin/env node
// node_lineserver.js: the line-protocol server of lineserver.py, on Node's `net` module
// (PHYSICS §1, §3). Serves specimens/lineclient.py: `GET <i>\r\n` -> 8 lines
// `attr-<k>: value-<i>-<k>\r\n` and the terminator `.\r\n`, each line with its own
// socket.write() -- the natural way to stream a reply in Node.
//
// Node's default for `net` sockets is Nagle ON: net.createServer({noDelay}) defaults to false
// (Node 20 docs; only the `http` server defaults noDelay to true), and libuv does not set
// TCP_NODELAY by itself. socket.write() on an idle stream goes straight to the kernel
// (libuv tries the write synchronously), so 9 write() calls on a Nagle-on socket: line 1
// leaves, the rest wait for the client's ACK. Whether that stalls was MEASURED, see
// testdata/captures/lang_node_perline_server.expect.
//
//   --nodelay   net.createServer({noDelay: true}): the same writes with TCP_NODELAY.
//   --fixed     one socket.write() of the whole response.
//
// Prints `PORT <n>` once listening, serves --max-conns connections and exits; idle sockets
// close after --idle-timeout s, and the process exits at --deadline s whatever happens.
'use strict';
const net = require('net');

const args = process.argv.slice(2);
const opt = { nodelay: false, fixed: false, port: 0, maxConns: 1, lines: 8, idle: 5, deadline: 120 };
for (let i = 0; i < args.length; i++) {
  switch (args[i]) {
    case '--nodelay': opt.nodelay = true; break;
    case '--fixed': opt.fixed = true; break;
    case '--port': opt.port = Number(args[++i]); break;
    case '--max-conns': opt.maxConns = Number(args[++i]); break;
    case '--lines': opt.lines = Number(args[++i]); break;
    case '--idle-timeout': opt.idle = Number(args[++i]); break;
    case '--deadline': opt.deadline = Number(args[++i]); break;
    default: console.error(`unknown argument ${args[i]}`); process.exit(2);
  }
}
setTimeout(() => { console.error('node_lineserver: deadline'); process.exit(1); }, opt.deadline * 1000).unref();

let conns = 0, served = 0;
const server = net.createServer(opt.nodelay ? { noDelay: true } : {}, (sock) => {
  conns++;
  if (conns >= opt.maxConns) server.close(); // stop accepting; exit once this socket is done
  sock.setTimeout(opt.idle * 1000, () => sock.destroy());
  let buf = '';
  sock.setEncoding('latin1');
  sock.on('data', (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const req = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      const i = req.split(/\s+/)[1] || '?';
      const lines = [];
      for (let k = 1; k <= opt.lines; k++) lines.push(`attr-${k}: value-${i}-${k}\r\n`);
      lines.push('.\r\n');
      if (opt.fixed) sock.write(lines.join(''));
      else for (const l of lines) sock.write(l); // one write per line
      served++;
    }
  });
  sock.on('end', () => sock.end());
  sock.on('error', () => {});
});
server.on('close', () => {
  console.error(`node_lineserver nodelay=${opt.nodelay} fixed=${opt.fixed} served ${served} requests on ${conns} connections`);
});
server.listen(opt.port, '127.0.0.1', () => {
  console.log(`PORT ${server.address().port}`);
});
// An idle listener with no connection gives up too.
setTimeout(() => { if (conns === 0) server.close(); }, opt.idle * 1000).unref();
