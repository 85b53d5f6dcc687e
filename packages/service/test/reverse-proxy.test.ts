import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { password } from "./helpers/fixtures.ts";
import { freePort, repoRoot } from "./helpers/process.ts";
import { startService, type TestService } from "./helpers/service.ts";

/**
 * contrib/reverse-proxy/nginx.conf and Caddyfile, run by the real nginx and Caddy in front of the
 * service (TRUST_PROXY=127.0.0.1, as the files say). The test configurations are the contrib files
 * with only the machine-specific parts replaced: ports, certificate paths, the service's address,
 * and the allowed API clients (loopback is taken out, so this test's client is "another host").
 */
const binaries = { nginx: "/usr/sbin/nginx", caddy: "/usr/bin/caddy" } as const;
const contrib = (name: string) => readFileSync(join(repoRoot, "contrib/reverse-proxy", name), "utf8");
const host = "accounts.example.org";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** An HTTPS request to the proxy on 127.0.0.1, for `host`, trusting the test's own certificate. */
function ask(
  port: number,
  ca: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        servername: host,
        ca,
        method,
        path,
        headers: { host, ...headers },
        timeout: 10_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer`)));
    req.end(body);
  });
}

async function waitForPort(port: number, ca: string, child: ChildProcess, output: () => string) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`proxy exited: ${output()}`);
    try {
      await ask(port, ca, "GET", "/.well-known/openpgpkey/example.org/policy");
      return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`proxy did not answer: ${String(error)} ${output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

interface Proxy {
  port: number;
  stop(): Promise<void>;
}

function run(command: string, args: string[], env: Record<string, string> = {}) {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (chunk) => (output += chunk));
  child.stderr?.on("data", (chunk) => (output += chunk));
  return {
    child,
    output: () => output,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Replaces `from` in `text`, failing when the contrib file no longer has it (the test would drift). */
function replaced(text: string, from: string | RegExp, to: string): string {
  assert.match(
    text,
    typeof from === "string" ? new RegExp(from.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")) : from,
  );
  return text.replace(from, to);
}

async function startNginx(dir: string, upstream: number, ca: string): Promise<Proxy> {
  const [port, plain] = [await freePort(), await freePort()];
  let site = contrib("nginx.conf");
  site = replaced(site, "server 127.0.0.1:8000;", `server 127.0.0.1:${upstream};`);
  site = replaced(site, "listen 443 ssl;", `listen 127.0.0.1:${port} ssl;`);
  site = replaced(site, "listen 80;", `listen 127.0.0.1:${plain};`);
  site = replaced(site, /\n\s*listen \[::\]:\d+( ssl)?;/g, "");
  site = replaced(site, "/etc/ssl/mail-account-service/fullchain.pem", join(dir, "cert.pem"));
  site = replaced(site, "/etc/ssl/mail-account-service/privkey.pem", join(dir, "key.pem"));
  site = replaced(site, /\n\s*allow (127\.0\.0\.1|::1);/g, "");
  writeFileSync(join(dir, "site.conf"), site);
  // The main file a distribution provides, made for an unprivileged run in a temporary directory.
  const user = process.getuid?.() === 0 ? "user root root;\n" : "";
  writeFileSync(
    join(dir, "nginx.conf"),
    `${user}daemon off;\nworker_processes 1;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\nevents { worker_connections 64; }\nhttp {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n  include ${dir}/site.conf;\n}\n`,
  );
  const nginx = run(binaries.nginx, ["-p", dir, "-c", join(dir, "nginx.conf"), "-e", join(dir, "error.log")]);
  await waitForPort(port, ca, nginx.child, () => nginx.output() + readIfThere(join(dir, "error.log")));
  return { port, stop: nginx.stop };
}

async function startCaddy(dir: string, upstream: number, ca: string): Promise<Proxy> {
  const [port, plain] = [await freePort(), await freePort()];
  let site = contrib("Caddyfile");
  site = replaced(site, /127\.0\.0\.1:8000/g, `127.0.0.1:${upstream}`);
  site = replaced(site, "remote_ip 127.0.0.1 ::1 192.0.2.0/24", "remote_ip 192.0.2.0/24");
  site = replaced(
    site,
    "accounts.example.org, mta-sts.example.org, openpgpkey.example.org {",
    `accounts.example.org, mta-sts.example.org, openpgpkey.example.org {\n\ttls ${dir}/cert.pem ${dir}/key.pem`,
  );
  const global = `{\n\tadmin off\n\tdefault_bind 127.0.0.1\n\thttp_port ${plain}\n\thttps_port ${port}\n\tauto_https disable_redirects\n\tstorage file_system ${dir}/caddy\n\tskip_install_trust\n}\n`;
  writeFileSync(join(dir, "Caddyfile"), global + site);
  const env = { HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir };
  const caddy = run(
    binaries.caddy,
    ["run", "--config", join(dir, "Caddyfile"), "--adapter", "caddyfile"],
    env,
  );
  await waitForPort(port, ca, caddy.child, caddy.output);
  return { port, stop: caddy.stop };
}

const readIfThere = (file: string) => (existsSync(file) ? readFileSync(file, "utf8") : "");

for (const name of ["nginx", "caddy"] as const) {
  describe(`the contrib ${name} configuration in front of the service`, () => {
    const missing = !existsSync(binaries[name]);
    if (missing) {
      // Said, not passed silently: CI installs both (.ci/run).
      console.log(
        `# ${name}: ${binaries[name]} not found (apt-get install ${name}); these tests are skipped`,
      );
    }
    let service: TestService;
    let proxy: Proxy;
    let dir: string;
    let ca: string;

    before(async () => {
      if (missing) return;
      dir = mkdtempSync(join(tmpdir(), `mas-${name}-`));
      for (const sub of ["body", "proxy", "fastcgi", "uwsgi", "scgi", "caddy"]) mkdirSync(join(dir, sub));
      execFileSync(
        "openssl",
        [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:prime256v1",
          "-nodes",
          "-days",
          "1",
          "-subj",
          `/CN=${host}`,
          "-addext",
          `subjectAltName=DNS:${host},DNS:mta-sts.example.org,DNS:openpgpkey.example.org`,
          "-keyout",
          join(dir, "key.pem"),
          "-out",
          join(dir, "cert.pem"),
        ],
        { stdio: "ignore" },
      );
      ca = readFileSync(join(dir, "cert.pem"), "utf8");
      service = await startService({ web: true, trustProxy: "127.0.0.1" });
      await service.services.domains.create("example.org");
      await service.services.users.create({ email: "alice@example.org", password, mailCrypt: false });
      const upstream = Number(new URL(service.url).port);
      proxy = await (name === "nginx" ? startNginx : startCaddy)(dir, upstream, ca);
    });
    after(async () => {
      await proxy?.stop();
      await service?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test("web pages work through it, with HSTS, and the service knows the visitor used TLS", {
      skip: missing,
    }, async () => {
      const page = await ask(proxy.port, ca, "GET", "/login");
      assert.equal(page.status, 200, page.body);
      assert.match(page.body, /name="_csrf"/);
      assert.match(String(page.headers["strict-transport-security"]), /max-age=\d+/);
      // X-Forwarded-Proto: https reached the service: its CSRF cookie is the __Host- one.
      const cookies = [page.headers["set-cookie"] ?? []].flat();
      assert.ok(
        cookies.some((line) => /^__Host-csrf=.*; Secure/.test(line)),
        cookies.join("\n"),
      );
      const css = await ask(proxy.port, ca, "GET", "/static/style.css");
      assert.equal(css.status, 200);
      const wkd = await ask(proxy.port, ca, "GET", "/.well-known/openpgpkey/example.org/policy");
      assert.equal(wkd.status, 200);
      assert.match(String(wkd.headers["strict-transport-security"]), /max-age=\d+/);
    });

    test("a client-sent X-Forwarded-For is not the client address the service sees", {
      skip: missing,
    }, async () => {
      const forged = { "x-forwarded-for": "198.51.100.66" };
      const page = await ask(proxy.port, ca, "GET", "/login", forged);
      const cookie = [page.headers["set-cookie"] ?? []]
        .flat()
        .map((line) => line.split(";")[0])
        .join("; ");
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1] ?? "";
      const form = new URLSearchParams({ _csrf: csrf, email: "alice@example.org", password }).toString();
      const signIn = await ask(
        proxy.port,
        ca,
        "POST",
        "/login",
        { ...forged, cookie, "content-type": "application/x-www-form-urlencoded" },
        form,
      );
      assert.equal(signIn.status, 303, signIn.body);
      assert.equal(signIn.headers.location, "/account");
      const sessions = await service.services.database.db
        .selectFrom("web_sessions")
        .select("client_address")
        .execute();
      const addresses = sessions.map((row) => row.client_address);
      assert.ok(addresses.length > 0);
      assert.ok(!addresses.includes("198.51.100.66"), addresses.join(", "));
      assert.ok(
        addresses.every((address) => address === "127.0.0.1"),
        addresses.join(", "),
      );
    });

    test("the APIs stay closed to hosts not listed", { skip: missing }, async () => {
      for (const path of ["/api/mta/mailbox/alice@example.org", "/api/admin/users", "/metrics", "/health"]) {
        const answer = await ask(proxy.port, ca, "GET", path);
        assert.ok([403, 404].includes(answer.status), `${path}: ${answer.status}`);
        assert.doesNotMatch(answer.body, /API token|"status"/, path);
      }
    });
  });
}
