// A JVM line server: a ServerSocket, a thread per connection, a reply of a few lines built
// in a StringBuilder and written once. The JVM's interpreter, JIT compilers and GC make the
// first requests dear: work, not a spin. Run with `java LineServer.java PORT` (single-file
// launch: compiled at start).
import java.io.*;
import java.net.*;
import java.nio.charset.StandardCharsets;

public class LineServer {
    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[0]);
        ServerSocket server = new ServerSocket(port, 128, InetAddress.getByName("127.0.0.1"));
        System.out.println("listening on 127.0.0.1:" + port);
        while (true) {
            Socket s = server.accept();
            new Thread(() -> serve(s)).start();
        }
    }

    static void serve(Socket s) {
        try (s) {
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
            OutputStream out = new BufferedOutputStream(s.getOutputStream());
            String line;
            long n = 0;
            while ((line = in.readLine()) != null) {
                n++;
                StringBuilder reply = new StringBuilder();
                for (int i = 0; i < 5; i++) {
                    reply.append(200 + i).append(' ').append(line.trim()).append(" row ").append(n * i).append("\r\n");
                }
                reply.append(".\r\n");
                out.write(reply.toString().getBytes(StandardCharsets.UTF_8));
                out.flush();
            }
        } catch (IOException e) {
            // the driver closed: nothing to do
        }
    }
}
