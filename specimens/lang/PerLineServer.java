/*
 * PerLineServer.java: the line-protocol server of lineserver.py, in Java with java.net defaults
 * (PHYSICS §1, §3). Serves specimens/lineclient.py: `GET <i>\r\n` -> 8 lines
 * `attr-<k>: value-<i>-<k>\r\n` and the terminator `.\r\n`.
 *
 * --mode perline  THE PATHOLOGY. A plain java.net.Socket (TCP_NODELAY false: Nagle ON, the Java
 *                 default) and a BufferedOutputStream that is flush()ed after every line, the way
 *                 a PrintWriter with autoflush or a "write a line, flush" loop behaves. Each
 *                 flush() is one write() syscall: line 1 leaves at once, lines 2-9 wait behind
 *                 Nagle for the client's ACK of line 1, which the client delays (~40 ms ato)
 *                 because it is waiting for the rest of the reply. Expect nagle_delayed_ack +
 *                 fragmented_writes, server_to_client.
 * --mode fixed    The fixed twin: the same bytes written into the BufferedOutputStream and one
 *                 flush() per response (one write() syscall, one segment). Nagle still ON.
 *
 * Prints `PORT <n>` once listening (port 0 = any free port), serves --max-conns connections one
 * at a time and exits; a connection idle for --idle-timeout seconds ends it, and the whole
 * process exits at --deadline seconds whatever happens.
 *
 * Build: javac -d OUT PerLineServer.java    Run: java -cp OUT PerLineServer --mode perline
 */
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;

public class PerLineServer {
    public static void main(String[] args) throws IOException {
        String mode = "perline";
        int port = 0, maxConns = 1, lines = 8;
        double idle = 5.0, deadlineS = 120.0;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--mode": mode = args[++i]; break;
                case "--port": port = Integer.parseInt(args[++i]); break;
                case "--max-conns": maxConns = Integer.parseInt(args[++i]); break;
                case "--lines": lines = Integer.parseInt(args[++i]); break;
                case "--idle-timeout": idle = Double.parseDouble(args[++i]); break;
                case "--deadline": deadlineS = Double.parseDouble(args[++i]); break;
                default:
                    System.err.println("usage: PerLineServer [--mode perline|fixed] [--port N] [--max-conns N]");
                    System.exit(2);
            }
        }
        if (!mode.equals("perline") && !mode.equals("fixed")) {
            System.err.println("unknown mode " + mode);
            System.exit(2);
        }
        final long deadlineMs = (long) (deadlineS * 1000);
        Thread watchdog = new Thread(() -> {
            try { Thread.sleep(deadlineMs); } catch (InterruptedException e) { return; }
            System.err.println("PerLineServer: deadline reached");
            System.exit(1);
        });
        watchdog.setDaemon(true);
        watchdog.start();

        int idleMs = (int) (idle * 1000);
        int served = 0, conns = 0;
        try (ServerSocket lst = new ServerSocket(port, 16, InetAddress.getByName("127.0.0.1"))) {
            lst.setSoTimeout(idleMs);
            System.out.println("PORT " + lst.getLocalPort());
            System.out.flush();
            while (conns < maxConns) {
                Socket s;
                try {
                    s = lst.accept();
                } catch (SocketTimeoutException e) {
                    break;
                }
                conns++;
                try (Socket sock = s) {
                    sock.setSoTimeout(idleMs);
                    // Deliberately no sock.setTcpNoDelay(...): the default (false) is the point.
                    served += serve(sock, mode.equals("perline"), lines);
                } catch (SocketTimeoutException e) {
                    System.err.println("PerLineServer: connection idle, closing");
                }
            }
        }
        System.err.println("PerLineServer mode=" + mode + " tcpNoDelay=false served " + served
                + " requests on " + conns + " connections");
    }

    static int serve(Socket sock, boolean perLine, int nLines) throws IOException {
        InputStream in = new BufferedInputStream(sock.getInputStream());
        OutputStream out = new BufferedOutputStream(sock.getOutputStream(), 8192);
        int served = 0;
        String req;
        while ((req = readLine(in)) != null) {
            String[] parts = req.trim().split("\\s+");
            String i = parts.length > 1 ? parts[1] : "?";
            for (int k = 1; k <= nLines + 1; k++) {
                String line = k <= nLines ? "attr-" + k + ": value-" + i + "-" + k + "\r\n" : ".\r\n";
                out.write(line.getBytes(StandardCharsets.US_ASCII));
                if (perLine) out.flush(); // one write() per line
            }
            if (!perLine) out.flush(); // one write() per response
            served++;
        }
        return served;
    }

    /** A CRLF-terminated line without its terminator, or null at end of stream. */
    static String readLine(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1) {
            if (c == '\n') {
                byte[] a = b.toByteArray();
                int n = a.length > 0 && a[a.length - 1] == '\r' ? a.length - 1 : a.length;
                return new String(a, 0, n, StandardCharsets.US_ASCII);
            }
            b.write(c);
        }
        return null;
    }
}
