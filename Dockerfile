# This project as an image: `docker run IMAGE fit --config configs/EXAMPLE.yaml` runs `python cli.py fit ...`.
#
# One image serves CPU and CUDA nodes: PyPI's Linux torch wheels bundle the CUDA runtime (the node only
# needs the NVIDIA driver) and train on the CPU when no GPU is visible. A smaller CPU-only image:
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu -t IMAGE .
# Optional extras from pyproject.toml: --build-arg EXTRAS=NAME[,NAME...].
# PYTHON_VERSION must be 3.11 or newer (the dependency step reads pyproject.toml with tomllib).
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim

ARG TORCH_INDEX_URL=""
ARG EXTRAS=""
ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The manifests and Run:ai commands of trainrig/kubernetes/jobs.py run relative paths from here.
WORKDIR /workspace

# Dependencies from pyproject.toml alone, so a code change does not download torch again.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install ${TORCH_INDEX_URL:+--extra-index-url $TORCH_INDEX_URL} -r /tmp/requirements.txt

# The README's install command; the dependencies are already in place.
COPY . .
RUN pip install ${TORCH_INDEX_URL:+--extra-index-url $TORCH_INDEX_URL} -e ".${EXTRAS:+[$EXTRAS]}"

ENTRYPOINT ["python", "cli.py"]
CMD ["--help"]
