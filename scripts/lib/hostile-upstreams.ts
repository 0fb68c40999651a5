/**
 * Servers a hostile tenant runs for its MCP configurations: each speaks one protocol just far
 * enough to reach a client library's parser, then sends what breaks it or floods it.
 */
import net, { type AddressInfo } from "node:net";

export interface Upstream {
  host: string;
  port: number;
  /** Bytes written to clients so far. */
  sent(): number;
  close(): void;
}

async function tcpServer(host: string, onConnection: (socket: net.Socket, count: (n: number) => void) => void): Promise<Upstream> {
  const sockets = new Set<net.Socket>();
  let sent = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => sockets.delete(socket));
    onConnection(socket, (n) => (sent += n));
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return {
    host,
    port: (server.address() as AddressInfo).port,
    sent: () => sent,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** A PostgreSQL message: its type byte, then its length (itself included) and body. */
function pgMessage(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, "latin1");
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const PG_READY = Buffer.concat([pgMessage("R", Buffer.from([0, 0, 0, 0])), pgMessage("Z", Buffer.from("I"))]); // AuthenticationOk, ReadyForQuery

/** Answers a PostgreSQL startup with a DataRow that claims one field and carries none (`44 00 00 00 06 00 01`). */
export function postgresMalformedRow(host: string): Promise<Upstream> {
  return tcpServer(host, (socket, count) =>
    socket.once("data", () => {
      const bytes = Buffer.from([0x44, 0, 0, 0, 6, 0, 1]);
      count(bytes.length);
      socket.write(bytes);
    }),
  );
}

/**
 * Logs any client in, then answers every query with one text column and rows without end, until
 * `totalBytes` have gone (or the client hangs up), as fast as the client reads.
 */
export function postgresFlood(host: string, totalBytes: number): Promise<Upstream> {
  const row = pgMessage("D", Buffer.concat([Buffer.from([0, 1, 0, 0, 0x3f, 0xf0]), Buffer.alloc(0x3ff0, "x")])); // one 16 KiB field
  const description = pgMessage(
    "T",
    Buffer.concat([Buffer.from([0, 1]), Buffer.from("table_name\0"), Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0])]),
  );
  return tcpServer(host, (socket, count) => {
    let started = false;
    socket.on("data", (data) => {
      if (!started) {
        started = true;
        socket.write(PG_READY);
        return;
      }
      if (data[0] !== 0x51 && data[0] !== 0x50) return; // 'Q' a simple query, 'P' the extended protocol's Parse
      socket.write(data[0] === 0x50 ? Buffer.concat([pgMessage("1"), pgMessage("2"), description]) : description); // ParseComplete, BindComplete
      let left = totalBytes;
      const pump = (): void => {
        while (left > 0 && !socket.destroyed) {
          left -= row.length;
          count(row.length);
          if (!socket.write(row)) return void socket.once("drain", pump);
        }
      };
      pump();
    });
  });
}

/** A MySQL packet: 3-byte length, sequence id, payload. */
function mysqlPacket(seq: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUIntLE(payload.length, 0, 3);
  head[3] = seq;
  return Buffer.concat([head, payload]);
}

/** Greets with a v10 handshake, takes any login with OK, and sends a truncated error packet nobody asked for in the same segment. */
export function mysqlUnsolicited(host: string): Promise<Upstream> {
  const salt = Buffer.alloc(20, 0x41);
  const greeting = Buffer.concat([
    Buffer.from([0x0a]),
    Buffer.from("8.0.36\0"),
    Buffer.from([1, 0, 0, 0]), // connection id
    salt.subarray(0, 8),
    Buffer.from([0]),
    Buffer.from([0x0f, 0xa2]), // capabilities, low: long password, found rows, long flag, connect with db, protocol 4.1, transactions, secure connection
    Buffer.from([0x21]), // utf8
    Buffer.from([2, 0]), // status: autocommit
    Buffer.from([0x08, 0x00]), // capabilities, high: plugin auth
    Buffer.from([21]),
    Buffer.alloc(10),
    salt.subarray(8),
    Buffer.from([0]),
    Buffer.from("mysql_native_password\0"),
  ]);
  return tcpServer(host, (socket, count) => {
    count(greeting.length + 4);
    socket.write(mysqlPacket(0, greeting));
    socket.once("data", () => {
      const bytes = Buffer.concat([mysqlPacket(2, Buffer.from([0, 0, 0, 2, 0, 0, 0])), mysqlPacket(3, Buffer.from([0xff]))]);
      count(bytes.length);
      socket.write(bytes);
    });
  });
}

/** Answers a websocket upgrade request with a redirect to `http://[`, an address no URL parser takes. */
export function websocketBadRedirect(host: string): Promise<Upstream> {
  const answer = Buffer.from("HTTP/1.1 302 Found\r\nLocation: http://[\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  return tcpServer(host, (socket, count) =>
    socket.once("data", () => {
      count(answer.length);
      socket.end(answer);
    }),
  );
}

/** Accepts connections and never answers (reads and drops what comes). */
export function silentServer(host: string): Promise<Upstream> {
  return tcpServer(host, (socket) => socket.resume());
}

/**
 * Answers any HTTP request (a websocket upgrade among them) with 200 and a body without end, until
 * `totalBytes` have gone or the client hangs up: what a REST, GitHub, Slack or MCP-over-HTTP client reads.
 */
export function httpFlood(host: string, totalBytes: number): Promise<Upstream> {
  const chunk = Buffer.from(`data: ${"x".repeat(64 * 1024)}\n\n`);
  return tcpServer(host, (socket, count) =>
    socket.once("data", () => {
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
      let left = totalBytes;
      const pump = (): void => {
        while (left > 0 && !socket.destroyed) {
          left -= chunk.length;
          count(chunk.length);
          if (!socket.write(chunk)) return void socket.once("drain", pump);
        }
        socket.end();
      };
      pump();
    }),
  );
}
