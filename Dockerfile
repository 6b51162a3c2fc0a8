# The chat-agent project image: every service (gateway, router, lookup, agent), the
# graph loader and the TuringDB server binary from the `turingdb` wheel; the Reactome
# data and the embedding model are copied in, so nothing is downloaded at run time.
# Built by compose.yaml; by hand: docker build -t chat-agent .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OMP_NUM_THREADS=1 \
    OPENBLAS_NUM_THREADS=1 \
    HF_HUB_OFFLINE=1 \
    STATE_DIR=/state \
    GATEWAY_HOST=0.0.0.0

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin chat \
    && mkdir -p /state/turingdb \
    && chown -R chat:chat /state

WORKDIR /app

# the pinned dependencies of pyproject.toml, then the project itself (editable, so that
# data/ and models/ beside the code are found)
COPY pyproject.toml README.md ./
COPY shared/ shared/
COPY services/ services/
RUN pip install -e . && chat-agent --help > /dev/null

COPY data/ data/
COPY models/ models/

USER chat
EXPOSE 8000
CMD ["chat-agent", "gateway"]
