"""The members endpoints as a Python team would write them: FastAPI + SQLAlchemy 2 (async, asyncpg),
over the very tables gymapi uses. A peer for `bench/run`, not part of the product.

    DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/DB \
        uvicorn fastapi_app:app --port 8092 --workers 1 --no-access-log

Same contract as gymapi for the benchmarked paths: the API key in `Authorization: Bearer`, resolved
to its gym by its SHA-256 fingerprint; `GET /api/v1/members/{id}`; `GET /api/v1/members` with
`page`, `per_page` (25, gymapi's default), `search` (substring of name or email), newest first,
with the exact `total`; `POST /api/v1/members` (first and last name, email), filed under the gym's
first facility. No rate limit and no idempotency keys (they would only slow the peer down).
"""

import hashlib
import math
import os
import uuid
from datetime import datetime, timezone

from fastapi import Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel
from sqlalchemy import Boolean, DateTime, Integer, String, Uuid, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

engine = create_async_engine(os.environ["DATABASE_URL"], pool_size=10, max_overflow=0)
Session = async_sessionmaker(engine, expire_on_commit=False)
app = FastAPI()


class Base(DeclarativeBase):
    pass


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    gym_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    fingerprint: Mapped[str] = mapped_column(String)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Gym(Base):
    __tablename__ = "gyms"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    api_access: Mapped[bool] = mapped_column(Boolean)


class Facility(Base):
    __tablename__ = "facilities"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    gym_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class Member(Base):
    __tablename__ = "members"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    gym_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    facility_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    first_name: Mapped[str] = mapped_column(String)
    last_name: Mapped[str] = mapped_column(String)
    email: Mapped[str | None] = mapped_column(String)
    email_normalized: Mapped[str | None] = mapped_column(String)
    phone: Mapped[str | None] = mapped_column(String)
    gender: Mapped[str | None] = mapped_column(String)
    city: Mapped[str | None] = mapped_column(String)
    country: Mapped[str | None] = mapped_column(String)
    status: Mapped[str] = mapped_column(String)
    legacy_id: Mapped[str | None] = mapped_column(String)
    visits_count: Mapped[int] = mapped_column(Integer)
    last_visit_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    search_text: Mapped[str] = mapped_column(String)


async def session():
    async with Session() as s:
        yield s


async def gym_of(authorization: str = Header(default=""), db: AsyncSession = Depends(session)) -> uuid.UUID:
    key = authorization.removeprefix("Bearer ").strip()
    fingerprint = hashlib.sha256(key.encode()).hexdigest()
    row = (
        await db.execute(
            select(ApiKey.gym_id)
            .join(Gym, Gym.id == ApiKey.gym_id)
            .where(ApiKey.fingerprint == fingerprint, ApiKey.revoked_at.is_(None), Gym.api_access)
        )
    ).first()
    if row is None:
        raise HTTPException(401, "Invalid or missing API key.")
    return row[0]


def record(m: Member) -> dict:
    return {
        "object": "member",
        "id": str(m.id),
        "first_name": m.first_name,
        "last_name": m.last_name,
        "email": m.email,
        "phone": m.phone,
        "gender": m.gender,
        "city": m.city,
        "country": m.country,
        "status": m.status,
        "facility_id": str(m.facility_id),
        "legacy_id": m.legacy_id,
        "visits_count": m.visits_count,
        "last_visit_at": m.last_visit_at.isoformat() if m.last_visit_at else None,
        "created_at": m.created_at.isoformat(),
        "updated_at": m.updated_at.isoformat(),
    }


@app.get("/api/v1/members/{member_id}")
async def get_member(member_id: uuid.UUID, gym: uuid.UUID = Depends(gym_of), db: AsyncSession = Depends(session)):
    m = (await db.execute(select(Member).where(Member.gym_id == gym, Member.id == member_id))).scalar_one_or_none()
    if m is None:
        raise HTTPException(404, "No such member.")
    return record(m)


@app.get("/api/v1/members")
async def list_members(
    page: int = 1,
    per_page: int = 25,
    search: str | None = None,
    gym: uuid.UUID = Depends(gym_of),
    db: AsyncSession = Depends(session),
):
    where = [Member.gym_id == gym]
    if search:
        where.append(Member.search_text.like(f"%{search.lower()}%"))
    total = (await db.execute(select(func.count()).select_from(Member).where(*where))).scalar_one()
    rows = (
        await db.execute(
            select(Member)
            .where(*where)
            .order_by(Member.created_at.desc(), Member.id.desc())
            .limit(per_page)
            .offset((page - 1) * per_page)
        )
    ).scalars()
    return {
        "data": [record(m) for m in rows],
        "meta": {
            "current_page": page,
            "per_page": per_page,
            "total": total,
            "last_page": max(1, math.ceil(total / per_page)),
        },
    }


class NewMember(BaseModel):
    first_name: str
    last_name: str
    email: str | None = None


@app.post("/api/v1/members", status_code=201)
async def create_member(body: NewMember, gym: uuid.UUID = Depends(gym_of), db: AsyncSession = Depends(session)):
    facility = (
        await db.execute(
            select(Facility.id).where(Facility.gym_id == gym).order_by(Facility.created_at, Facility.id).limit(1)
        )
    ).scalar_one()
    now = datetime.now(timezone.utc)
    m = Member(
        id=uuid.uuid4(),
        gym_id=gym,
        facility_id=facility,
        first_name=body.first_name,
        last_name=body.last_name,
        email=body.email,
        email_normalized=body.email.lower() if body.email else None,
        status="active",
        visits_count=0,
        created_at=now,
        updated_at=now,
        search_text=f"{body.first_name} {body.last_name}\n{body.email or ''}".lower(),
    )
    db.add(m)
    await db.commit()
    return record(m)
