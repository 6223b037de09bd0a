"""A labelled retrieval set for the facts ledger: facts, questions that should find them, and
ordinary distractor facts generated deterministically.

Two kinds of question:

- ``paraphrase``: asks about a fact in other words ("Which languages does Maria know?" for
  "Maria speaks Portuguese and Spanish fluently.");
- ``identifier``: names an exact identifier the fact holds (an order, ticket, host, path...).

Each kind is split in two halves by position: ``tune`` (even positions), used to choose the
fusion settings, and ``report`` (odd positions), never looked at while tuning; the benchmark
reports both and the documentation quotes ``report``.
"""

from __future__ import annotations

import random
from typing import Literal

Kind = Literal["paraphrase", "identifier"]
Split = Literal["tune", "report"]

PARAPHRASE: list[tuple[str, str]] = [
    ("Maria speaks Portuguese and Spanish fluently.", "Which languages does Maria know?"),
    ("Alice is on call this week for the payments service.", "Who gets paged if checkout breaks?"),
    ("The offsite budget is capped at 20,000 EUR.", "How much money can we spend on the retreat?"),
    ("Tomasz is allergic to peanuts.", "Is there any food Tomasz must avoid?"),
    ("The quarterly board review happens on the first Monday of April.", "When do the directors meet to look at results?"),
    ("Our office in Lisbon closes at 6pm on Fridays.", "Until what time is the Portugal branch open at the end of the week?"),
    ("Kenji prefers window seats on long flights.", "Where does Kenji like to sit on the plane?"),
    ("The staging cluster runs on three Hetzner machines.", "What hardware hosts the pre-production environment?"),
    ("Priya manages the mobile team.", "Who is the boss of the people building the phone app?"),
    ("Refunds above 500 dollars need approval from finance.", "Who must sign off on a large money-back request?"),
    ("The wedding anniversary dinner is booked at Chez Laurent.", "Which restaurant did we reserve for the celebration?"),
    ("Daniel drives a blue Tesla Model 3.", "What car does Daniel own?"),
    ("The marketing newsletter goes out every Thursday morning.", "On which weekday do we email our subscribers?"),
    ("Sofia is vegetarian.", "Does Sofia eat meat?"),
    ("The warehouse in Rotterdam stores all spare parts.", "Where are replacement components kept?"),
    ("Our main competitor lowered prices by 10 percent last month.", "Did the rival company get cheaper recently?"),
    ("Lena's daughter starts kindergarten in September.", "When does Lena's child begin preschool?"),
    ("The production database is backed up every six hours.", "How often do we take snapshots of the live data store?"),
    ("Ahmed is fluent in Arabic and French.", "What tongues can Ahmed converse in?"),
    ("The team lunch is on the rooftop terrace.", "Where will the group eat together at midday?"),
    ("Chen works remotely from Vancouver.", "In which city is Chen based?"),
    ("The contract with Acme renews automatically in March.", "When is the agreement with our supplier extended without action?"),
    ("Olivia broke her wrist skiing in January.", "How did Olivia get injured this winter?"),
    ("The support hotline is staffed around the clock.", "Can customers phone us at night?"),
    ("Marco plays bass guitar in a jazz band.", "Which instrument does Marco perform with?"),
    ("New hires get a laptop and two monitors on their first day.", "What equipment does a newcomer receive when joining?"),
    ("The coffee machine on the third floor is out of order.", "Is the espresso maker upstairs working?"),
    ("Grace is on parental leave until June.", "When will Grace be back from looking after her baby?"),
    ("Our servers are hosted in Frankfurt for GDPR reasons.", "In which country does the infrastructure live because of privacy law?"),
    ("Ivan's flight lands at 7:40 in Zurich.", "What time does Ivan arrive in Switzerland?"),
    ("The kids' swimming lessons are on Wednesday afternoons.", "When do the children practise in the pool?"),
    ("Rachel is training for the Berlin marathon.", "What race is Rachel preparing for?"),
    ("Expense reports must be filed within 30 days.", "What is the deadline for claiming back costs?"),
    ("The CEO will retire at the end of the year.", "Is the chief executive stepping down?"),
    ("Hannah's cat is called Pepper.", "What is the name of Hannah's pet?"),
    ("The printer on floor two only prints in black and white.", "Can I get colour copies from the second-level device?"),
    ("Our app supports English, German and Japanese.", "Which locales is the product translated into?"),
    ("Pablo graduated in mechanical engineering from Madrid.", "What did Pablo study at university?"),
    ("The parking garage opens at 6am.", "How early can I leave my car in the lot?"),
    ("Yuki collects vintage film cameras.", "What is Yuki's hobby?"),
    ("Interns are paid 1,800 euros per month.", "What is the monthly salary of trainees?"),
    ("The holiday party is on December 19 at the Grand Hotel.", "When and where is the end-of-year celebration?"),
    ("Noah has two older sisters.", "How many siblings does Noah have?"),
    ("The legacy billing system will be switched off in May.", "When are we retiring the old invoicing platform?"),
    ("Emma is afraid of flying.", "Does Emma get nervous on airplanes?"),
    ("We ship orders from our Dublin fulfilment centre.", "Where are parcels sent out from?"),
    ("The gym in the basement is free for employees.", "Do staff pay to use the fitness room downstairs?"),
    ("Lucas is the best chess player in the office.", "Who wins most board games among colleagues?"),
    ("The design review moved to conference room Everest.", "Where is the meeting about the mockups now?"),
    ("Our biggest customer is a hospital chain in Texas.", "Who brings in the most revenue for us?"),
    ("Fatima bakes sourdough bread every weekend.", "What does Fatima cook on Saturdays and Sundays?"),
    ("The Wi-Fi password for guests is printed at reception.", "How can visitors get online?"),
    ("George retired from the navy after twenty years.", "What was George's career before?"),
    ("The company was founded in 2011 in Stockholm.", "When and where did the business start?"),
    ("The sales team missed its target by 8 percent in Q3.", "Did the sellers hit their goal last quarter?"),
    ("Isabel's birthday is on the 14th of February.", "When should we celebrate Isabel getting older?"),
    ("The air conditioning fails whenever it gets above 35 degrees.", "What happens to the cooling on very hot days?"),
    ("Omar is learning to play the violin.", "What instrument is Omar picking up?"),
    ("Customer data is deleted 90 days after an account closes.", "How long do we keep information about people who left?"),
    ("The elevator is being repaired until Tuesday.", "Can I take the lift this weekend?"),
    ("Julia leads the accessibility working group.", "Who heads the effort to make the product usable for disabled people?"),
    ("We sponsor the local youth football club.", "Which sports organisation do we give money to?"),
    ("Pets are allowed in the office on Fridays.", "Can I bring my dog to work?"),
    ("Thomas moved to the data science department.", "Which group did Thomas transfer to?"),
    ("The annual performance reviews start in November.", "When are yearly appraisals held?"),
    ("Our carbon emissions fell by a quarter since 2020.", "Has the firm become greener lately?"),
    ("Nina suffers from migraines when she looks at screens too long.", "Why does Nina get headaches at the computer?"),
    ("The fire drill is scheduled for next Wednesday at 10am.", "When is the evacuation exercise?"),
    ("The mobile app crashes on older Android phones.", "Does the application work on outdated Samsung devices?"),
    ("Victor owns a vineyard in Bordeaux.", "Does Victor make wine?"),
    ("Meeting rooms can be booked up to two weeks ahead.", "How far in advance can I reserve a space for a call?"),
    ("The onboarding course takes three days.", "How long is the training for new starters?"),
    ("Clara speaks at the Web Summit in Lisbon next month.", "Which conference is Clara presenting at?"),
    ("The roof of the north building leaks when it rains.", "Is there water damage in one of the towers?"),
    ("Our return policy allows exchanges within 14 days.", "How long do buyers have to swap an item?"),
    ("Ben is colour blind.", "Does Ben have trouble telling red from green?"),
    ("The cafeteria serves breakfast until 10:30.", "Until when can I get a morning meal in the canteen?"),
    ("The API rate limit is 100 requests per minute per key.", "How many calls can a client make before being throttled?"),
    ("Anna volunteers at an animal shelter on Sundays.", "What charity work does Anna do?"),
    ("The VPN must be used when working from cafes.", "Do I need a secure tunnel on public networks?"),
]

IDENTIFIER: list[tuple[str, str]] = [
    ("Order #W482913 ships from Denver on Friday.", "status of W482913"),
    ("Ticket JIRA-4821 tracks the login timeout bug.", "what is JIRA-4821 about?"),
    ("The failing test is tests/api/test_refunds.py::test_partial.", "why does test_refunds.py fail"),
    ("Reservation OBUT9V is in economy class.", "what cabin is OBUT9V"),
    ("Invoices go to billing@northwind.example.com.", "who reads billing@northwind.example.com"),
    ("Flight HAT175 leaves Las Vegas at 13:00.", "HAT175 departure time"),
    ("Host db-prod-07 has a failing disk.", "problems on db-prod-07"),
    ("Release v2.14.3 fixed the memory leak in the exporter.", "what changed in v2.14.3"),
    ("Customer C-99812 asked for a discount on renewal.", "what does C-99812 want"),
    ("The config lives in /etc/orbit/agent.yaml.", "where is /etc/orbit/agent.yaml used"),
    ("PR #5521 adds retries to the uploader.", "what does PR 5521 do"),
    ("Account sofia_kim_7287 was locked after three failed logins.", "sofia_kim_7287 account state"),
    ("Container image registry.local/api:4f2c9a is the last good build.", "is registry.local/api:4f2c9a good"),
    ("Shipment TRK-88301-NL was delayed by customs.", "where is TRK-88301-NL"),
    ("Feature flag enable_dark_mode_v2 is on for 10% of users.", "rollout of enable_dark_mode_v2"),
    ("Incident INC-2093 was caused by an expired TLS certificate.", "root cause of INC-2093"),
    ("The runbook is at https://wiki.example.com/ops/failover.", "https://wiki.example.com/ops/failover"),
    ("Patient record MRN-004417 needs a follow-up scan.", "next step for MRN-004417"),
    ("Vendor SKU AX-220-B is out of stock until March.", "availability of AX-220-B"),
    ("Cron job nightly_export_02 runs at 02:15 UTC.", "schedule of nightly_export_02"),
    ("Branch feature/payments-refactor is ready for review.", "feature/payments-refactor status"),
    ("Error code E4012 means the quota is exhausted.", "meaning of E4012"),
    ("The S3 bucket acme-logs-eu-west-1 keeps logs for 30 days.", "retention of acme-logs-eu-west-1"),
    ("Laptop asset TAG-30117 belongs to the design team.", "who has TAG-30117"),
    ("Policy POL-77 forbids sharing customer exports.", "what does POL-77 say"),
    ("Queue orders.v3.dlq has 412 stuck messages.", "how many messages in orders.v3.dlq"),
    ("Room B2-114 has the projector that works.", "equipment in B2-114"),
    ("Contract CTR-2024-0187 ends on June 30.", "end date of CTR-2024-0187"),
    ("The migration script migrate_0042_add_index.sql locks the users table.", "does migrate_0042_add_index.sql lock anything"),
    ("Build 98231 failed on the arm64 runner.", "build 98231 result"),
    ("Promo code SPRING25 gives 25% off shoes.", "what is SPRING25"),
    ("Phone extension x4471 reaches the night porter.", "who answers x4471"),
    ("Dataset sales_2023_q4.parquet has duplicate rows.", "quality of sales_2023_q4.parquet"),
    ("Server 10.2.14.7 is the backup DNS resolver.", "role of 10.2.14.7"),
    ("Model checkpoint ckpt-step-120000 gave the best validation loss.", "how good is ckpt-step-120000"),
    ("Work order WO-55910 replaces the lobby lights.", "WO-55910 scope"),
    ("The API key prefix pk_live_ is for production only.", "where to use pk_live_ keys"),
    ("Course CS-241 is taught by Professor Adeyemi.", "who teaches CS-241"),
    ("Pipeline etl-customers-daily skips weekends.", "does etl-customers-daily run on Saturday"),
    ("Warehouse bin R12-S04 holds the spare routers.", "what is in R12-S04"),
]

FIRST = [
    "Aiden", "Bianca", "Carlos", "Dana", "Elif", "Felix", "Gita", "Hugo", "Irene", "Jonas", "Kara", "Leo",
    "Mina", "Nils", "Oona", "Petra", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Vera", "Wes", "Xena", "Yara", "Zane",
]
TEAMS = ["data", "platform", "web", "search", "billing", "growth", "infra", "security", "research", "operations"]
THINGS = [
    "quarterly report", "release notes", "hiring plan", "roadmap", "design doc", "postmortem", "test plan",
    "vendor review", "security audit", "pricing page", "launch checklist", "customer survey",
]
PLACES = ["Denver", "Boston", "Austin", "Oslo", "Madrid", "Prague", "Seoul", "Nairobi", "Perth", "Lyon"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
TOOLS = ["Postgres", "Redis", "Kafka", "Grafana", "Terraform", "Jenkins", "Airflow", "Sentry"]
TOPICS = ["cache", "queue", "dashboard", "login page", "export job", "search index", "email service", "scheduler"]


def distractors(n: int = 1000, seed: int = 5) -> list[str]:
    """``n`` ordinary facts of an ordinary team: people, meetings, tools, places and numbers.

    They share the everyday words of the labelled facts (team, meeting, budget, office...) but
    use other names, so none answers a labelled question.
    """
    rng = random.Random(seed)
    forms = [
        lambda: f"{rng.choice(FIRST)} owns the {rng.choice(THINGS)} for the {rng.choice(TEAMS)} team.",
        lambda: f"The {rng.choice(TEAMS)} team meets every {rng.choice(DAYS)} at {rng.randint(8, 17)}:00.",
        lambda: f"We use {rng.choice(TOOLS)} for the {rng.choice(TOPICS)}.",
        lambda: f"The {rng.choice(THINGS)} is due on {rng.choice(DAYS)}.",
        lambda: f"{rng.choice(FIRST)} travels to {rng.choice(PLACES)} next week.",
        lambda: f"The {rng.choice(TOPICS)} budget is {rng.randint(2, 90)},000 dollars this year.",
        lambda: f"{rng.choice(FIRST)} joined the {rng.choice(TEAMS)} team in {rng.choice(PLACES)}.",
        lambda: f"The {rng.choice(TOPICS)} was slow on {rng.choice(DAYS)} because of {rng.choice(TOOLS)}.",
        lambda: f"{rng.choice(FIRST)} reviews the {rng.choice(THINGS)} with {rng.choice(FIRST)}.",
        lambda: f"The office in {rng.choice(PLACES)} has {rng.randint(5, 120)} desks.",
        lambda: f"{rng.choice(FIRST)} is out of office on {rng.choice(DAYS)}.",
        lambda: f"The {rng.choice(TEAMS)} team wants to replace {rng.choice(TOOLS)} with {rng.choice(TOOLS)}.",
    ]
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        text = rng.choice(forms)()
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def labelled(split: Split | None = None) -> list[tuple[Kind, str, str]]:
    """``(kind, fact, question)`` of one split (both when ``split`` is None)."""
    rows: list[tuple[Kind, str, str]] = []
    for kind, pairs in (("paraphrase", PARAPHRASE), ("identifier", IDENTIFIER)):
        for i, (fact, question) in enumerate(pairs):
            if split is None or (split == "tune") == (i % 2 == 0):
                rows.append((kind, fact, question))  # type: ignore[arg-type]
    return rows
