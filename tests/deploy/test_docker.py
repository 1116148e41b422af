"""Static checks of the team deployment in docker/: the compose file, both Dockerfiles,
.env.example and .dockerignore, without a Docker engine (none is needed or used).

The checkers return a list of problems, so one failure names every problem; each is also fed a
broken input to show that it can fail. The image's entry point (docker/entrypoint.sh) and the
PostgreSQL init script are run for real: the first with sh on a copy of the project's files,
the second against the throwaway server of conftest.py (skipped without one).
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"

SERVICES = {"postgres", "mlflow", "user-code", "dagster-webserver", "dagster-daemon"}
DAGSTER_SERVICES = {"user-code", "dagster-webserver", "dagster-daemon"}
PG_VARS = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB")
SECRET_NAME = re.compile(r"pass(word|wd)?($|_)|secret|token|(^|_)key($|_)|credential|api_?key|private", re.I)
# ${VAR}, ${VAR:?message}, ${VAR?message}, ${VAR:-default}, ${VAR-default}
INTERPOLATION = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}")
URL_CREDENTIALS = re.compile(r"://(?P<user>[^:/@\s]+):(?P<password>[^@\s]+)@")
PLACEHOLDERS = {"", "change-me"}
MLFLOW_AUTH_VARS = ("MLFLOW_AUTH_DATABASE_URI", "MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD",
                    "MLFLOW_FLASK_SERVER_SECRET_KEY")


# ----------------------------------------------------------------------------- helpers


def load_compose(path: Path = DOCKER / "compose.yaml") -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def as_env(environment) -> dict[str, str]:
    """A service's environment as a dict (compose accepts a mapping or a list of KEY=VALUE)."""
    if environment is None:
        return {}
    if isinstance(environment, dict):
        return {str(k): "" if v is None else str(v) for k, v in environment.items()}
    return dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)


def secret_value_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable secret: it must be empty or a single interpolation
    without a literal default (``${VAR}``, ``${VAR:?message}``, ``${VAR:-}``)."""
    if value == "":
        return None
    match = INTERPOLATION.fullmatch(value)
    if match is None:
        return "is a literal, not ${...} interpolation"
    if match["op"] in (":-", "-", ":+", "+") and match["arg"]:
        return f"has a literal default ({match['arg']!r})"
    return None


def walk(node, path: str = ""):
    """Every (dotted path, key, scalar value) of a parsed YAML document, list entries included
    (``KEY=VALUE`` strings split into key and value)."""
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{key}" if path else str(key)
            if isinstance(value, (dict, list)):
                yield from walk(value, sub)
            else:
                yield sub, str(key), "" if value is None else str(value)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, (dict, list)):
                yield from walk(item, f"{path}[{i}]")
            elif isinstance(item, str) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", item):
                key, value = item.split("=", 1)
                yield f"{path}[{i}]", key, value
            else:
                yield f"{path}[{i}]", "", "" if item is None else str(item)


def url_passwords(value: str) -> list[str]:
    """The password parts of the URLs in ``value`` (``scheme://user:PASSWORD@host``), with
    ``${...}`` interpolations (whose messages may hold ':' or spaces) read as single tokens."""
    found: list[str] = []

    def mask(match: re.Match) -> str:
        found.append(match.group(0))
        return f"\x00{len(found) - 1}\x00"

    masked = INTERPOLATION.sub(mask, value)
    return [re.sub("\x00(\\d+)\x00", lambda m: found[int(m[1])], match["password"])
            for match in URL_CREDENTIALS.finditer(masked)]


def secret_problems(document) -> list[str]:
    """Plaintext secrets in a parsed compose file: a secret-looking key holding a literal (or an
    interpolation with a literal default), or a URL with a literal password."""
    problems = []
    for where, key, value in walk(document):
        if key and SECRET_NAME.search(key) and (why := secret_value_problem(value)):
            problems.append(f"{where}: {why}")
        for password in url_passwords(value):
            if why := secret_value_problem(password):
                problems.append(f"{where}: the password in a URL {why}")
    return problems


def port_problem(entry) -> str | None:
    if isinstance(entry, dict):  # long syntax
        return None if entry.get("host_ip") == "127.0.0.1" else f"{entry} is not bound to host_ip 127.0.0.1"
    text = str(entry)
    if not text.startswith("127.0.0.1:") or text.count(":") < 2:
        return f"{text!r} is not bound to 127.0.0.1 (write \"127.0.0.1:HOST:CONTAINER\")"
    return None


def has_healthcheck(service: dict) -> bool:
    check = service.get("healthcheck") or {}
    test = check.get("test")
    return bool(test) and not check.get("disable") and test not in (["NONE"], "NONE")


def compose_problems(compose: dict) -> list[str]:
    """Everything docker/compose.yaml must get right, as a list of problems."""
    problems: list[str] = []
    services = compose.get("services") or {}
    if missing := SERVICES - set(services):
        problems.append(f"missing services: {sorted(missing)}")
    problems += secret_problems(compose)
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        for entry in service.get("ports") or []:
            if why := port_problem(entry):
                problems.append(f"{name}: port {why}")
        if not has_healthcheck(service):
            problems.append(f"{name}: no healthcheck")
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):
            problems.append(f"{name}: depends_on is a list; use condition: service_healthy")
        else:
            for dep, spec in depends.items():
                if (spec or {}).get("condition") != "service_healthy":
                    problems.append(f"{name}: depends_on {dep} without condition: service_healthy")
                elif dep in services and not has_healthcheck(services[dep]):
                    problems.append(f"{name}: depends on {dep}, which has no healthcheck")
        for volume in service.get("volumes") or []:
            source = volume.get("source") if isinstance(volume, dict) else str(volume).split(":", 1)[0]
            if source and not source.startswith((".", "/", "~", "$")) and source not in declared_volumes:
                problems.append(f"{name}: volume {source!r} is not declared under volumes:")
        env = as_env(service.get("environment"))
        for key, value in env.items():
            if "PASSWORD" in key.upper() and not INTERPOLATION.fullmatch(value):
                problems.append(f"{name}: {key} must be ${{...}} interpolation")
    for name in DAGSTER_SERVICES & set(services):
        env = as_env(services[name].get("environment"))
        if env.get("DAGSTER_STORAGE") != "postgres":
            problems.append(f"{name}: DAGSTER_STORAGE is not postgres")
        if missing := [v for v in PG_VARS if not env.get(v)]:
            problems.append(f"{name}: missing {missing}")
        elif env["DAGSTER_PG_HOST"] != "postgres":
            problems.append(f"{name}: DAGSTER_PG_HOST is {env['DAGSTER_PG_HOST']!r}, not the postgres service")
    if "mlflow" in services:
        mlflow = services["mlflow"]
        command = [str(c) for c in mlflow.get("command") or []]
        env = as_env(mlflow.get("environment"))
        store = env.get("MLFLOW_BACKEND_STORE_URI", "")
        if "--backend-store-uri" in command:
            store = command[command.index("--backend-store-uri") + 1]
        if not store.startswith("postgresql"):
            problems.append(f"mlflow: backend store {store!r} is not postgresql://...")
        if "--host" not in command or command[command.index("--host") + 1] != "0.0.0.0":
            problems.append("mlflow: the server must listen on 0.0.0.0 inside its container (--host 0.0.0.0)")
        if "--artifacts-destination" not in command:
            problems.append("mlflow: no --artifacts-destination")
        if "--app-name" not in command or command[command.index("--app-name") + 1] != "basic-auth":
            problems.append("mlflow: no authentication (--app-name basic-auth)")
        if missing := [v for v in MLFLOW_AUTH_VARS if not env.get(v)]:
            problems.append(f"mlflow: the basic-auth app misses {missing}")
    if "postgres" in services and "change-me" not in "\n".join(str(a) for a in services["postgres"].get("entrypoint") or []):
        problems.append("postgres: the placeholder password of .env.example is not refused (entrypoint)")
    return problems


# ----------------------------------------------------------------------------- Dockerfiles


def dockerfile_instructions(text: str) -> list[tuple[int, str, str]]:
    """(stage index, INSTRUCTION, arguments) of a Dockerfile: continuation lines joined,
    comments and blank lines dropped; stage 0 is the first FROM."""
    out, stage, pending = [], -1, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if not line.strip():
            continue
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        out.append((stage, keyword, " ".join(args.split())))
    return out


def env_pairs(keyword: str, args: str) -> list[tuple[str, str | None]]:
    """The (name, value) pairs of an ENV or ARG instruction (value None: an ARG without default)."""
    if keyword == "ENV" and "=" not in args.split(" ", 1)[0]:
        name, _, value = args.partition(" ")  # the legacy `ENV NAME value` form
        return [(name, value)]
    pairs = []
    for token in re.findall(r'(?:[^\s"]+|"[^"]*")+', args):
        name, eq, value = token.partition("=")
        pairs.append((name, value.strip('"') if eq else None))
    return pairs


def arg_defaults(instructions) -> dict[str, str]:
    return {name: value for _, keyword, args in instructions if keyword == "ARG"
            for name, value in env_pairs("ARG", args) if value is not None}


def dockerfile_problems(text: str) -> list[str]:
    """What every lmforge image must get right, as a list of problems."""
    problems = []
    instructions = dockerfile_instructions(text)
    stages = [args for _, keyword, args in instructions if keyword == "FROM"]
    if len(stages) < 2:
        problems.append(f"not multi-stage ({len(stages)} FROM)")
    final = max((s for s, _, _ in instructions), default=-1)
    last = [(keyword, args) for s, keyword, args in instructions if s == final]
    keywords = [keyword for keyword, _ in last]
    users = [i for i, k in enumerate(keywords) if k == "USER"]
    starts = [i for i, k in enumerate(keywords) if k in ("CMD", "ENTRYPOINT")]
    if not users:
        problems.append("no USER in the final stage: the image would run as root")
    else:
        user = last[users[-1]][1].split(":", 1)[0]
        if user in ("root", "0"):
            problems.append(f"the final stage runs as {user}")
        if starts and users[-1] > min(starts):
            problems.append("USER comes after CMD/ENTRYPOINT in the final stage")
    if not starts:
        problems.append("no CMD or ENTRYPOINT in the final stage")
    if not any(k == "HEALTHCHECK" and not a.upper().startswith("NONE") for k, a in last):
        problems.append("no HEALTHCHECK in the final stage")
    if ("WORKDIR", "/project") not in last:
        problems.append("the final stage's WORKDIR is not /project")
    final_env = {name: value for k, a in last if k == "ENV" for name, value in env_pairs("ENV", a)}
    if final_env.get("PYTHONUNBUFFERED") != "1":
        problems.append("PYTHONUNBUFFERED=1 is not set in the final stage")
    if not any(k == "COPY" and a.startswith("--from=") and "/opt/venv" in a for k, a in last):
        problems.append("the final stage does not copy the virtual environment from the builder")
    for _, keyword, args in instructions:
        if keyword in ("ENV", "ARG"):
            for name, value in env_pairs(keyword, args):
                if SECRET_NAME.search(name):
                    problems.append(f"{keyword} {name}: secrets must not be baked into the image"
                                    + (" (it holds a value)" if value else ""))
        if keyword in ("COPY", "ADD") and re.search(r"(^|[\s/])\.env(\s|$)", args):
            problems.append(f"{keyword} {args}: copies an .env file into the image")
    # the team extra: `pip install ".[team]"`, or its requirements read from pyproject.toml
    # (docker/requirements.py ... team) in a layer before the code
    if not any(k == "RUN" and (".[team]" in a or re.search(r"requirements\.py\s+\S+\s+(\S+\s+)*team\b", a))
               for _, k, a in instructions):
        problems.append("the project is not installed with its team extra (pip install \".[team]\")")
    return problems


def torch_pin() -> str:
    return re.search(r'"torch==([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))[1]


def torch_install(text: str) -> tuple[str, str]:
    """(the torch version, the index URL) of the image's `pip install torch==...`, ARGs resolved."""
    instructions = dockerfile_instructions(text)
    defaults = arg_defaults(instructions)
    for _, keyword, args in instructions:
        if keyword == "RUN" and (m := re.search(r"pip install (?:\S+ )*?torch==(\S+)", args)):
            index = re.search(r"--index-url\s+\"?([^\s\"]+)", args)
            url = index[1] if index else ""
            for _ in range(5):  # an ARG's default may name an earlier ARG
                url = re.sub(r"\$\{?(\w+)\}?", lambda v: defaults.get(v[1], v[0]), url)
            return m[1], url
    return "", ""


def base_images(text: str) -> list[str]:
    """The images the stages start from, ARGs resolved; a stage built on an earlier one is left out."""
    instructions = dockerfile_instructions(text)
    defaults = arg_defaults(instructions)
    bases, stages = [], set()
    for _, keyword, args in instructions:
        if keyword == "FROM":
            words = args.split()
            image = re.sub(r"\$\{?(\w+)\}?", lambda v: defaults.get(v[1], v[0]), words[0])
            if image not in stages:
                bases.append(image)
            if len(words) >= 3 and words[1].upper() == "AS":
                stages.add(words[2])
    return bases


# ----------------------------------------------------------------------------- the compose file


def test_compose_file_is_right():
    assert compose_problems(load_compose()) == []


def test_compose_problems_are_caught():
    good = load_compose()
    assert compose_problems(good) == []

    bad = copy.deepcopy(good)
    bad["services"]["dagster-webserver"]["ports"] = ["3000:3000"]
    bad["services"]["mlflow"]["ports"] = ["0.0.0.0:5000:5000"]
    bad["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] = "hunter2"
    bad["services"]["user-code"]["environment"]["DAGSTER_PG_PASSWORD"] = "${POSTGRES_PASSWORD:-hunter2}"
    bad["services"]["mlflow"]["environment"]["MLFLOW_BACKEND_STORE_URI"] = "postgresql://u:hunter2@postgres/mlflow"
    bad["services"]["dagster-daemon"]["depends_on"] = ["postgres"]
    del bad["services"]["dagster-daemon"]["healthcheck"]
    bad["services"]["dagster-webserver"]["environment"]["DAGSTER_STORAGE"] = "sqlite"
    del bad["services"]["user-code"]["environment"]["DAGSTER_PG_HOST"]
    bad["services"]["mlflow"]["command"].remove("--app-name")
    bad["services"]["mlflow"]["command"].remove("basic-auth")
    del bad["services"]["mlflow"]["environment"]["MLFLOW_AUTH_ADMIN_PASSWORD"]
    del bad["services"]["postgres"]["entrypoint"]
    problems = compose_problems(bad)
    text = "\n".join(problems)
    for expected in ("dagster-webserver: port '3000:3000'", "mlflow: port '0.0.0.0:5000:5000'",
                     "POSTGRES_PASSWORD: is a literal", "has a literal default ('hunter2')",
                     "the password in a URL is a literal", "dagster-daemon: depends_on is a list",
                     "dagster-daemon: no healthcheck", "dagster-webserver: DAGSTER_STORAGE is not postgres",
                     "user-code: missing ['DAGSTER_PG_HOST']", "mlflow: no authentication",
                     "misses ['MLFLOW_AUTH_ADMIN_PASSWORD']", "postgres: the placeholder password"):
        assert expected in text, f"{expected!r} not reported in:\n{text}"

    sqlite = copy.deepcopy(good)
    sqlite["services"]["mlflow"]["environment"]["MLFLOW_BACKEND_STORE_URI"] = "sqlite:////mlflow/mlflow.db"
    del sqlite["services"]["postgres"]
    text = "\n".join(compose_problems(sqlite))
    assert "missing services: ['postgres']" in text and "is not postgresql" in text
    long_form = copy.deepcopy(good)
    long_form["services"]["mlflow"]["ports"] = [{"target": 5000, "published": 5000}]
    assert any("host_ip 127.0.0.1" in p for p in compose_problems(long_form))


def test_compose_wiring():
    """The pieces fit together: the workspace names the code server the user-code service runs,
    the webserver and daemon load that workspace, user-code mounts the project volumes and
    points params.yaml at the MLflow service, a GPU block is offered for user-code, and every
    variable the file reads is documented in .env.example."""
    compose = load_compose()
    services = compose["services"]
    workspace = yaml.safe_load((DOCKER / "workspace.yaml").read_text(encoding="utf-8"))
    (grpc,) = [entry["grpc_server"] for entry in workspace["load_from"]]
    assert grpc["host"] == "user-code"
    command = [str(c) for c in services["user-code"]["command"]]
    assert command[:3] == ["dagster", "code-server", "start"]
    assert command[command.index("-p") + 1] == str(grpc["port"])
    assert command[command.index("-h") + 1] == "0.0.0.0"
    assert command[command.index("-m") + 1] == "dagster_project.definitions"
    for name in ("dagster-webserver", "dagster-daemon"):
        assert "/project/docker/workspace.yaml" in services[name]["command"], name
        assert "dagster-storage:/opt/dagster/home/storage" in services[name]["volumes"], name
    assert "ports" not in services["user-code"]  # reached by the webserver and daemon only
    store = as_env(services["mlflow"]["environment"])["MLFLOW_BACKEND_STORE_URI"]
    assert store.startswith("postgresql+psycopg2://")  # SQLAlchemy 2.1 reads plain postgresql:// as psycopg 3
    assert url_passwords(store) == ["${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in docker/.env}"]
    mounts = {v.split(":")[1] for v in services["user-code"]["volumes"]}
    assert {"/project/data", "/project/models", "/project/.dvc/cache", "/opt/dagster/home/storage"} <= mounts
    assert "tracking.uri=http://mlflow:5000" in as_env(services["user-code"]["environment"])["LMFORGE_SET"]
    mlflow_command = [str(c) for c in services["mlflow"]["command"]]
    destination = INTERPOLATION.sub(lambda m: m["arg"] or "", mlflow_command[mlflow_command.index("--artifacts-destination") + 1])
    assert f"mlflow-artifacts:{destination}" in services["mlflow"]["volumes"]

    text = (DOCKER / "compose.yaml").read_text(encoding="utf-8")
    user_code_block = text[text.index("  user-code:"):text.index("  dagster-webserver:")]
    assert re.search(r"#\s+deploy:\s*\n(\s*#.*\n)*?\s*#\s+- driver: nvidia", user_code_block)

    used = {m["name"] for m in INTERPOLATION.finditer(text.replace("$$", ""))}  # $$: for the container's shell
    documented = set(read_env_file(DOCKER / ".env.example"))
    assert used - documented == set(), f"variables of compose.yaml missing from .env.example: {sorted(used - documented)}"


# ----------------------------------------------------------------------------- images


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_dockerfile_is_right(name):
    text = (DOCKER / name).read_text(encoding="utf-8")
    assert dockerfile_problems(text) == []
    version, _ = torch_install(text)
    assert version == torch_pin(), f"{name} installs torch {version}, pyproject.toml pins {torch_pin()}"


def test_cpu_image_installs_torch_from_the_cpu_index():
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert torch_install(text)[1] == "https://download.pytorch.org/whl/cpu"
    assert base_images(text) == ["python:3.11-slim", "python:3.11-slim"]


def test_cuda_image_installs_a_cuda_torch_on_a_cuda_base():
    text = (DOCKER / "Dockerfile.cuda").read_text(encoding="utf-8")
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu\d{3}", torch_install(text)[1])
    bases = base_images(text)
    assert len(bases) == 2 and all(b.startswith("nvidia/cuda:") and ("runtime" in b or "base" in b) for b in bases), bases


def test_dockerfile_problems_are_caught():
    single_stage_root = (
        "FROM python:3.11-slim\n"
        "ENV API_TOKEN=abc123 \\\n    OTHER=1\n"
        "ARG DB_PASSWORD\n"
        "COPY docker/.env /project/.env\n"
        "RUN pip install .\n"
        "CMD [\"python\"]\n"
        "USER app\n")
    text = "\n".join(dockerfile_problems(single_stage_root))
    for expected in ("not multi-stage", "ENV API_TOKEN", "(it holds a value)", "ARG DB_PASSWORD",
                     "copies an .env file", "USER comes after CMD", "no HEALTHCHECK",
                     "WORKDIR is not /project", "PYTHONUNBUFFERED", "team extra"):
        assert expected in text, f"{expected!r} not reported in:\n{text}"
    good = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    as_root = good.replace("USER lmforge", "USER root")
    assert "the final stage runs as root" in dockerfile_problems(as_root)
    no_user = good.replace("USER lmforge", "")
    assert any("no USER in the final stage" in p for p in dockerfile_problems(no_user))
    # a USER only in the builder stage does not count
    builder_user = good.replace("USER lmforge", "").replace("RUN python3 -m venv /opt/venv", "USER nobody\nRUN python3 -m venv /opt/venv")
    assert any("no USER in the final stage" in p for p in dockerfile_problems(builder_user))


def test_dockerignore_keeps_state_and_credentials_out_of_the_image():
    patterns = {line.strip().lstrip("/") for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")}
    needed = {".git", ".venv", "data", "models", "mlflow.db", "mlartifacts", ".dagster", ".dvc/cache",
              ".dvc/config.local", "**/.env"}
    assert needed - patterns == set()


# ----------------------------------------------------------------------------- .env


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, eq, value = line.partition("=")
            assert eq, f"{path}: not KEY=VALUE: {line!r}"
            values[key.strip()] = value.strip()
    return values


def test_env_example_holds_only_placeholders():
    values = read_env_file(DOCKER / ".env.example")
    assert {"POSTGRES_USER", "POSTGRES_PASSWORD"} <= set(values)
    secrets = {k: v for k, v in values.items() if SECRET_NAME.search(k)}
    assert secrets and all(v in PLACEHOLDERS for v in secrets.values()), secrets
    for key, value in values.items():
        assert not URL_CREDENTIALS.search(value), f"{key} holds a URL with credentials"


def test_env_file_is_git_ignored():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path]).returncode == 0

    assert ignored("docker/.env") and ignored(".env")
    assert not ignored("docker/.env.example")


# ----------------------------------------------------------------------------- the entry point


def _project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "dagster_project").mkdir(parents=True)
    (project / "docker").mkdir()
    for name in ("dagster.yaml", "dagster.postgres.yaml"):
        shutil.copy(ROOT / "dagster_project" / name, project / "dagster_project" / name)
    shutil.copy(ROOT / "docker" / "set_params.py", project / "docker" / "set_params.py")
    shutil.copy(ROOT / "params.yaml", project / "params.yaml")
    return project


def _entrypoint(project: Path, home: Path, **env) -> subprocess.CompletedProcess:
    base = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "LMFORGE_PROJECT": str(project), "DAGSTER_HOME": str(home),
            "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), "sh", "-c", "echo ran as $DAGSTER_HOME"],
                          env={**base, **env}, capture_output=True, text=True, timeout=120)


PG_ENV = {"DAGSTER_STORAGE": "postgres", "DAGSTER_PG_HOST": "postgres", "DAGSTER_PG_PORT": "5432",
          "DAGSTER_PG_USER": "lmforge", "DAGSTER_PG_PASSWORD": "test-only", "DAGSTER_PG_DB": "dagster"}


def test_entrypoint_selects_the_postgres_instance_and_points_params_at_mlflow(tmp_path):
    from lmforge.config import load_params

    project, home = _project_copy(tmp_path), tmp_path / "home"
    done = _entrypoint(project, home, **PG_ENV, LMFORGE_SET="tracking.uri=http://mlflow:5000 tracking.experiment=team")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ran as {home}"
    assert (home / "dagster.yaml").read_bytes() == (ROOT / "dagster_project" / "dagster.postgres.yaml").read_bytes()
    params = load_params(project / "params.yaml")
    assert params.tracking.uri == "http://mlflow:5000" and params.tracking.experiment == "team"
    before = (ROOT / "params.yaml").read_text(encoding="utf-8").splitlines()
    after = (project / "params.yaml").read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 2, changed  # comments and layout kept
    assert "test-only" not in done.stdout + done.stderr


def test_entrypoint_defaults_to_sqlite_and_refuses_incomplete_postgres_settings(tmp_path):
    project, home = _project_copy(tmp_path), tmp_path / "home"
    done = _entrypoint(project, home)
    assert done.returncode == 0, done.stderr
    assert (home / "dagster.yaml").read_bytes() == (ROOT / "dagster_project" / "dagster.yaml").read_bytes()

    for env, message in (({**PG_ENV, "DAGSTER_PG_PASSWORD": ""}, "needs DAGSTER_PG_PASSWORD"),
                         ({**PG_ENV, "DAGSTER_PG_PASSWORD": "change-me"}, "placeholder"),
                         ({"DAGSTER_STORAGE": "mysql"}, "must be sqlite or postgres")):
        done = _entrypoint(project, tmp_path / "other", **env)
        assert done.returncode == 64 and message in done.stderr and "ran as" not in done.stdout, done


def test_entrypoint_rejects_a_bad_override_and_leaves_params_alone(tmp_path):
    project, home = _project_copy(tmp_path), tmp_path / "home"
    before = (project / "params.yaml").read_bytes()
    done = _entrypoint(project, home, LMFORGE_SET="tracking.no_such_key=1")
    assert done.returncode != 0 and "no_such_key" in done.stderr and "ran as" not in done.stdout
    assert (project / "params.yaml").read_bytes() == before
    assert [p.name for p in project.iterdir() if p.name.startswith(".params")] == []


# the variables each service of compose.yaml receives a credential in: the placeholder of
# .env.example in any of them stops the service before its command runs
PLACEHOLDER_CASES = {
    "user-code": {"DAGSTER_PG_PASSWORD": "change-me"},
    "user-code (MLflow account)": {"MLFLOW_TRACKING_PASSWORD": "change-me"},
    "mlflow (admin)": {"MLFLOW_AUTH_ADMIN_PASSWORD": "change-me"},
    "mlflow (form signing)": {"MLFLOW_FLASK_SERVER_SECRET_KEY": "change-me"},
    "mlflow (store)": {"MLFLOW_BACKEND_STORE_URI": "postgresql+psycopg2://lmforge:change-me@postgres:5432/mlflow"},
    "mlflow (accounts)": {"MLFLOW_AUTH_DATABASE_URI": "postgresql+psycopg2://lmforge:change-me@postgres:5432/mlflow"},
}


@pytest.mark.parametrize("case", sorted(PLACEHOLDER_CASES))
def test_entrypoint_refuses_the_placeholder_password_for_every_service(tmp_path, case):
    project, home = _project_copy(tmp_path), tmp_path / "home"
    (variable, value), = PLACEHOLDER_CASES[case].items()
    done = _entrypoint(project, home, **{variable: value})
    assert done.returncode == 64 and "ran as" not in done.stdout, done
    assert done.stderr.strip() == (f"entrypoint: {variable} holds the placeholder password of docker/.env.example; "
                                   "set a real one in docker/.env")
    assert not home.exists()  # stopped before doing anything


def test_every_service_of_the_stack_meets_the_placeholder_check():
    """The services on the project's image go through docker/entrypoint.sh (its Dockerfile's
    ENTRYPOINT, not overridden); the postgres image through the guard of its own entrypoint."""
    services = load_compose()["services"]
    ours = [name for name, service in services.items() if str(service.get("image", "")).startswith("${LMFORGE")]
    assert set(ours) == SERVICES - {"postgres"}
    assert all("entrypoint" not in services[name] for name in ours)
    for name in ("Dockerfile", "Dockerfile.cuda"):
        entry = [a for _, k, a in dockerfile_instructions((DOCKER / name).read_text(encoding="utf-8")) if k == "ENTRYPOINT"]
        assert entry and "entrypoint.sh" in entry[-1], (name, entry)
    # every credential variable a service receives is one the entry point checks
    checked = set(re.findall(r"[A-Z_]+", (DOCKER / "entrypoint.sh").read_text(encoding="utf-8").split("for var in", 1)[1]
                             .split("; do", 1)[0]))
    for name in ours:
        for key, value in as_env(services[name].get("environment")).items():
            if "PASSWORD" in key or "SECRET" in key or url_passwords(value):
                assert key in checked, f"{name}: {key} is not checked by the entry point"


def _postgres_guard(tmp_path: Path, password: str) -> subprocess.CompletedProcess:
    """The postgres service's entrypoint as compose runs it, with a stand-in for the image's own
    docker-entrypoint.sh (which prints its arguments)."""
    service = load_compose()["services"]["postgres"]
    argv = [str(a).replace("$$", "$") for a in [*service["entrypoint"], *service["command"]]]
    fake = tmp_path / "bin" / "docker-entrypoint.sh"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "image entrypoint: $*"\n', encoding="utf-8")
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}{os.pathsep}/usr/bin:/bin", "POSTGRES_PASSWORD": password}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def test_postgres_refuses_the_placeholder_password(tmp_path):
    done = _postgres_guard(tmp_path, "change-me")
    assert done.returncode == 64 and done.stdout == ""
    assert done.stderr.strip() == ("postgres: POSTGRES_PASSWORD is the placeholder of docker/.env.example; "
                                   "set it in docker/.env")
    ok = _postgres_guard(tmp_path / "again", "a-real-password")
    assert ok.returncode == 0 and ok.stdout.strip() == "image entrypoint: postgres", ok


def test_entrypoint_writes_the_auth_apps_configuration_for_the_mlflow_service(tmp_path):
    project, home = _project_copy(tmp_path), tmp_path / "home"
    uri = "postgresql+psycopg2://lmforge:p%40ss@postgres:5432/mlflow"
    base = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "LMFORGE_PROJECT": str(project), "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT / "src"),
            "TMPDIR": str(tmp_path), "MLFLOW_AUTH_DATABASE_URI": uri, "MLFLOW_AUTH_ADMIN_USERNAME": "boss"}
    done = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), "python", "-c",
                           "import os; from mlflow.server.auth.config import read_auth_config as r; "
                           "print(os.environ['MLFLOW_AUTH_CONFIG_PATH']); c = r(); print(c.database_uri, c.admin_username)"],
                          env=base, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    path, read = done.stdout.splitlines()
    assert Path(path).parent == tmp_path and Path(path).stat().st_mode & 0o077 == 0  # this user's alone
    assert read == f"{uri} boss"  # what MLflow reads back ("%" kept)
    none = _entrypoint(project, tmp_path / "home2")  # the other services get no such file
    assert none.returncode == 0 and len(list(tmp_path.glob("mlflow-auth.*"))) == 1


# ----------------------------------------------------------------------------- PostgreSQL init


def test_postgres_init_script_creates_the_mlflow_database(postgres):
    """docker/postgres-init/ as the postgres image runs it (as the superuser, over the unix
    socket), against the test server: it creates the database, and a second run changes nothing."""
    if shutil.which("psql") is None:
        pytest.skip("no psql client")
    script = DOCKER / "postgres-init" / "10-create-mlflow-db.sh"
    env = {**os.environ, "POSTGRES_USER": "postgres", "POSTGRES_DB": "postgres", "MLFLOW_PG_DB": "mlflow_init_check",
           "PGHOST": str(postgres.socket_dir), "PGPORT": str(postgres.port)}
    admin = dict(host=str(postgres.socket_dir), user="postgres", password=None)
    try:
        for _ in range(2):
            done = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        connection = postgres.connect("postgres", **admin)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_database WHERE datname = 'mlflow_init_check'")
            assert cursor.fetchone()[0] == 1
        connection.close()
    finally:
        connection = postgres.connect("postgres", **admin)
        with connection.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS mlflow_init_check")
        connection.close()


# ----------------------------------------------------------------------------- the services' commands, without Docker


def _localize(args: list[str], ports: dict[str, int], replace: dict[str, str]) -> list[str]:
    """A compose command or healthcheck made runnable here: the container ports become free
    local ports (as arguments and inside URLs), 0.0.0.0 becomes 127.0.0.1, paths are mapped."""
    out = []
    for arg in args:
        arg = replace.get(arg, arg)
        for container, local in ports.items():
            arg = str(local) if arg == container else arg.replace(f":{container}/", f":{local}/")
        out.append("127.0.0.1" if arg == "0.0.0.0" else arg)
    return out


def _wait_healthy(check: list[str], env: dict, processes: dict, name: str, timeout: float = 180) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if processes[name].poll() is not None:
            pytest.fail(f"{name} exited ({processes[name].returncode}) before its healthcheck passed")
        if subprocess.run(check, env=env, capture_output=True, timeout=60).returncode == 0:
            return
        time.sleep(2)
    pytest.fail(f"{name}: healthcheck {check} did not pass in {timeout:.0f} s")


@pytest.mark.slow
def test_services_commands_and_healthchecks_work_without_docker(postgres, tmp_path):
    """Each long-running service's compose command, started through docker/entrypoint.sh as the
    image does (DAGSTER_STORAGE=postgres, the throwaway server's own databases), passes its
    compose healthcheck: the code server loads the lmforge location, the webserver serves it
    from docker/workspace.yaml (pointed at the local code server), the daemon heartbeats into
    PostgreSQL, and the MLflow server keeps its store and its accounts there, answers the Host
    header the other services send (mlflow:5000) but not an unknown one, and only to its admin
    account."""
    import http.client
    import json
    import signal
    import time

    from .conftest import free_port

    services = load_compose()["services"]
    admin = dict(host=str(postgres.socket_dir), user="postgres", password=None)
    databases = {"dagster": "dagster_compose_check", "mlflow": "mlflow_compose_check"}
    connection = postgres.connect("postgres", **admin)
    with connection.cursor() as cursor:
        for db in databases.values():
            cursor.execute(f"DROP DATABASE IF EXISTS {db}")
            cursor.execute(f"CREATE DATABASE {db} OWNER {postgres.user}")
    connection.close()

    ports = {"4000": free_port(), "3000": free_port(), "5000": free_port()}
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text((DOCKER / "workspace.yaml").read_text(encoding="utf-8")
                         .replace("host: user-code", "host: 127.0.0.1").replace("port: 4000", f"port: {ports['4000']}"),
                         encoding="utf-8")
    replace = {"/project": str(ROOT), "/project/docker/workspace.yaml": str(workspace),
               "${MLFLOW_ARTIFACTS_DESTINATION:-/mlflow/artifacts}": str(tmp_path / "artifacts")}
    allowed = services["mlflow"]["command"][services["mlflow"]["command"].index("--allowed-hosts") + 1]
    replace[allowed] = INTERPOLATION.sub(lambda m: m["arg"], allowed)  # the compose default
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "LMFORGE_PROJECT": str(ROOT), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
           "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "LMFORGE_SET": ""}
    dagster_env = {**env, "DAGSTER_STORAGE": "postgres", "DAGSTER_PG_HOST": postgres.host,
                   "DAGSTER_PG_PORT": str(postgres.port), "DAGSTER_PG_USER": postgres.user,
                   "DAGSTER_PG_PASSWORD": postgres.password, "DAGSTER_PG_DB": databases["dagster"]}
    account = ("lmforge-admin", "test-only-admin-password")  # MLflow's basic auth: the compose file's admin account
    mlflow_env = {**env, "MLFLOW_BACKEND_STORE_URI": postgres.uri(databases["mlflow"]), "TMPDIR": str(tmp_path),
                  "MLFLOW_AUTH_DATABASE_URI": postgres.uri(databases["mlflow"]), "MLFLOW_AUTH_ADMIN_USERNAME": account[0],
                  "MLFLOW_AUTH_ADMIN_PASSWORD": account[1], "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-only-signing-key"}
    envs = {"user-code": dagster_env, "dagster-webserver": dagster_env, "dagster-daemon": dagster_env,
            "mlflow": mlflow_env}

    processes: dict[str, subprocess.Popen] = {}
    try:
        for name in ("mlflow", "user-code", "dagster-webserver", "dagster-daemon"):  # compose's order
            command = _localize([str(c) for c in services[name]["command"]], ports, replace)
            log = open(tmp_path / f"{name}.log", "w")
            processes[name] = subprocess.Popen(["sh", str(DOCKER / "entrypoint.sh"), *command], env=envs[name],
                                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            check = _localize([str(c) for c in services[name]["healthcheck"]["test"][1:]], ports, replace)
            _wait_healthy(check, envs[name], processes, name)

        import base64

        login = {"Authorization": "Basic " + base64.b64encode(":".join(account).encode()).decode()}
        for host, auth, status in (("mlflow:5000", login, 200), ("mlflow:5000", {}, 401), ("evil.example", login, 403)):
            c = http.client.HTTPConnection("127.0.0.1", ports["5000"], timeout=30)
            c.request("POST", "/api/2.0/mlflow/experiments/search", body=json.dumps({"max_results": 1}),
                      headers={"Host": host, "Content-Type": "application/json", **auth})
            assert c.getresponse().status == status, (host, auth)
        query = ('{"query": "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus '
                 'locationOrLoadError { __typename } } } } }"}')
        c = http.client.HTTPConnection("127.0.0.1", ports["3000"], timeout=60)
        c.request("POST", "/graphql", body=query, headers={"Content-Type": "application/json"})
        (entry,) = json.loads(c.getresponse().read())["data"]["workspaceOrError"]["locationEntries"]
        assert (entry["name"], entry["loadStatus"], entry["locationOrLoadError"]["__typename"]) == \
            ("lmforge", "LOADED", "RepositoryLocation")
        assert postgres.query(databases["dagster"], "SELECT count(*) FROM daemon_heartbeats")[0][0] > 0
        assert postgres.query(databases["mlflow"], "SELECT count(*) FROM experiments")[0][0] >= 1
        assert postgres.query(databases["mlflow"], "SELECT username FROM users") == [(account[0],)]
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        connection = postgres.connect("postgres", **admin)
        with connection.cursor() as cursor:
            for db in databases.values():
                cursor.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        connection.close()


# ----------------------------------------------------------------------------- layers


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_a_code_change_does_not_reinstall_the_dependencies(name):
    """The dependencies are installed from pyproject.toml alone, before any of the code (src/,
    README.md, the project folder) is copied in; the final stage holds no compiler."""
    instructions = dockerfile_instructions((DOCKER / name).read_text(encoding="utf-8"))
    deps = next(i for i, (_, k, a) in enumerate(instructions) if k == "RUN" and "pip install -r /build/requirements.txt" in a)
    torch = next(i for i, (_, k, a) in enumerate(instructions) if k == "RUN" and "torch==" in a)
    assert torch < deps
    before = [a for _, k, a in instructions[:deps] if k in ("COPY", "ADD")]
    assert before == ["pyproject.toml docker/requirements.py /build/"], before
    final = max(s for s, _, _ in instructions)
    assert not any(s == final and "build-essential" in a for s, _, a in instructions)
    installs = [a for s, k, a in instructions if s == final and k == "RUN" and "pip install" in a]
    assert installs and all("--no-deps" in a for a in installs), installs
    # podman's build cache does not see what a bind mount from another stage holds: the wheel is copied
    assert not any(s == final and k == "RUN" and re.search(r"--mount=type=bind,[^ ]*from=", a) for s, k, a in instructions)


def test_requirements_reads_dependencies_and_extras(tmp_path):
    import tomllib

    script = DOCKER / "requirements.py"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    done = subprocess.run([sys.executable, str(script), str(ROOT / "pyproject.toml"), "team"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == project["dependencies"] + project["optional-dependencies"]["team"]
    done = subprocess.run([sys.executable, str(script), str(ROOT / "pyproject.toml"), "dev"],
                          capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    assert not any(line.startswith("lmforge") for line in lines)  # the self-reference expanded
    assert set(project["optional-dependencies"]["onnx"]) <= set(lines) and "pytest>=8,<10" in lines
    done = subprocess.run([sys.executable, str(script), str(ROOT / "pyproject.toml"), "nope"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "no extra named nope" in done.stderr
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "missing.toml")], capture_output=True, text=True)
    assert done.returncode == 66 and done.stderr.count("\n") == 1
