// A Node.js `net` client that writes each request as a header and a body in two
// socket.write() calls, then waits for the reply (the write-write-read pattern: with Nagle on,
// the body waits for the server's delayed ACK of the header). Connects to $TCPDOCTOR_SERVER
// (HOST:PORT); N requests (argv[2], default 10); exits 0 when all were answered.
const net = require("net");
const [host, port] = process.env.TCPDOCTOR_SERVER.split(":");
const n = parseInt(process.argv[2] || "10", 10);
const s = net.connect({ host, port: parseInt(port, 10), noDelay: false }, () => next(0));
let buf = "";
let done = 0;
function next(i) {
  const body = "payload=" + "x".repeat(40) + "\n";
  s.write("POST /item/" + i + " HTTP/1.1\r\nContent-Length: " + body.length + "\r\n\r\n");
  s.write(body);
}
s.on("data", (d) => {
  buf += d.toString();
  while (buf.includes("OK\r\n")) {
    buf = buf.slice(buf.indexOf("OK\r\n") + 4);
    done += 1;
    if (done === n) {
      s.end();
      return;
    }
    next(done);
  }
});
s.on("error", (e) => {
  console.error(e.message);
  process.exit(1);
});
